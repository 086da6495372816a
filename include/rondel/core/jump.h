// Jump consistent hash: maps a 64-bit key to one of `buckets` numbered shards, no memory.
//
// Source: Lamping and Veach, "A Fast, Minimal Memory, Consistent Hash Algorithm",
// arXiv:1406.2294 (2014), the paper's reference code verbatim. Growing from n to n+1 buckets
// moves exactly the keys that land in the new bucket (about 1/(n+1) of them). Buckets are
// numbered, so it suits shards that only grow or shrink at the end; it has no ids or weights and
// is not part of Selector. O(ln buckets) time. The reference code uses one double division per
// step; IEEE-754 makes it identical on every conforming platform.
#pragma once

#include <cstdint>

namespace rondel::core {

// Returns the bucket in [0, buckets) for `key`; -1 when buckets < 1.
int32_t jump_hash(uint64_t key, int32_t buckets) noexcept;

}  // namespace rondel::core
