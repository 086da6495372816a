// Fuzz target: the YAML configuration loader (config::load_string) over arbitrary text.
//
// Invariants: never crashes or throws; a result is either ok with at least one listener and one
// pool, or has errors that each carry a message and a non-negative position.
#include <cstdint>
#include <string>

#include "fuzz_util.h"
#include "rondel/config/loader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 16384) return 0;
  const std::string text(reinterpret_cast<const char*>(data), size);
  rondel::config::LoadResult r = rondel::config::load_string(text, "fuzz.yaml");
  if (r.ok()) {
    FUZZ_CHECK(!r.config.listeners.empty() && !r.config.pools.empty());
  } else {
    for (const auto& e : r.errors) {
      FUZZ_CHECK(!e.message.empty() && e.line >= 0 && e.column >= 0);
      FUZZ_CHECK(!e.to_string().empty());
    }
  }
  return 0;
}
