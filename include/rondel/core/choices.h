// The choices a pool configures for placement and the pick (Algorithm, ProbeOrder,
// ReplicaChoice), each with its one name table: config reads them, metrics, the reload dry-run
// and the admin API print them, with no copy of either.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace rondel::core {

// Which Selector places the keys (selector.h).
enum class Algorithm : uint8_t { kRing, kRendezvous, kMaglev, kSkeletonRendezvous };
inline constexpr std::string_view kAlgorithmNames[] = {"ring", "rendezvous", "maglev",
                                                       "skeleton_rendezvous"};

// Where bounded_pick looks past a full home (bounded.h).
enum class ProbeOrder : uint8_t { kClockwise, kRandom };
inline constexpr std::string_view kProbeOrderNames[] = {"clockwise", "random"};

// Which of a hot key's R replicas serves a request (bounded.h, route_pick).
enum class ReplicaChoice : uint8_t { kLeastLoaded, kRoundRobin };
inline constexpr std::string_view kReplicaChoiceNames[] = {"least_loaded", "round_robin"};

// The name of a value: the entry of its table at its index.
constexpr std::string_view name_of(Algorithm a) noexcept {
  return kAlgorithmNames[static_cast<size_t>(a)];
}
constexpr std::string_view name_of(ProbeOrder p) noexcept {
  return kProbeOrderNames[static_cast<size_t>(p)];
}
constexpr std::string_view name_of(ReplicaChoice r) noexcept {
  return kReplicaChoiceNames[static_cast<size_t>(r)];
}

}  // namespace rondel::core
