// Command-line options of kvsim, read from one table of (flag, field, help).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "oracle.h"
#include "server_model.h"

namespace kvsim {

struct Options {
  uint32_t servers = 8;
  uint32_t port = 0;          // servers listen on port .. port + servers - 1; 0: ephemeral ports
  uint32_t oracle_port = 0;   // 0: no oracle, unless `oracle` (then an ephemeral port)
  bool oracle = false;
  std::string host = "127.0.0.1";
  ServerConfig server{18600, 256, TimeModel{0.05, 0.00037, 0.03}};
  double speedup = 1;
  uint64_t seed = 0x6b7673696d;  // "kvsim"
  OracleParams oracle_params;
  bool orca = false;
  uint32_t chunk_ms = 50;
  uint32_t default_max_tokens = 16;
  uint64_t max_body = 64ull << 20;
  bool help = false;
};

// Parses argv; on error returns nullopt with `error` set.
std::optional<Options> parse_options(int argc, char** argv, std::string& error);
std::string usage();

}  // namespace kvsim
