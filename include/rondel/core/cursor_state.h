// CursorState: the few integers a lazy walk over one selector's preference order carries.
#pragma once

#include <cstdint>

namespace rondel::core {

// Shared by the Ring, Rendezvous, Maglev and SkeletonRendezvous walks; each algorithm documents
// what the fields mean. The set of backends already yielded lives in the caller's scratch bitset,
// not here.
struct CursorState {
  uint64_t hash = 0;     // the key hash being walked
  uint32_t pos = 0;      // ring: next point index; rehash walk: scan position
  uint32_t steps = 0;    // ring: points visited; rehash walk: probes used
  uint32_t yielded = 0;  // backends yielded so far
  uint8_t phase = 0;     // algorithm-specific stage (rehash walk: 0 owner, 1 probe, 2 scan)
};

}  // namespace rondel::core
