// Kubernetes EndpointSlice discovery (placeholder until the source lands).
#include "discovery_source.h"

namespace rondel::server {

DiscoverySource* make_k8s_source(Discovery& owner, std::string pool, std::string key,
                                 const config::DiscoveryConfig& cfg) {
  return make_etcd_source(owner, std::move(pool), std::move(key), cfg);
}

}  // namespace rondel::server
