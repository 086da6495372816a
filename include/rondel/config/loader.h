// Reads a rondel YAML file into a validated Config, reporting every error with FILE:LINE:COL.
//
// Only src/config/ includes yaml-cpp; its exceptions never leave this module. Loading does no
// I/O beyond reading the file (it binds nothing and resolves no name).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "rondel/config/config.h"

namespace rondel::config {

struct ConfigError {
  std::string file;
  int line = 0;    // 1-based; 0 when the error concerns the file as a whole
  int column = 0;  // 1-based
  std::string message;
  std::string to_string() const;  // "FILE:LINE:COL: message"
};

struct LoadResult {
  Config config;                    // meaningful only when errors is empty
  std::vector<ConfigError> errors;  // every error found, in file order
  bool ok() const { return errors.empty(); }
};

// Loads and validates the file at `path`.
LoadResult load_file(const std::string& path);
// Loads and validates YAML text; `file` is the name used in error messages.
LoadResult load_string(std::string_view yaml, const std::string& file);

// Parses "500ms", "2s", "1m", "1h" (and a bare integer of milliseconds) into milliseconds.
bool parse_duration_ms(std::string_view text, uint64_t& out) noexcept;
// Parses "512", "64KiB", "16MiB", "1GiB", "10KB", "1MB" into bytes.
bool parse_size_bytes(std::string_view text, uint64_t& out) noexcept;
// Parses "127.0.0.1:80", "[::1]:80", "host.name:80"; names allowed only when allow_name.
bool parse_address(std::string_view text, bool allow_name, Address& out) noexcept;

}  // namespace rondel::config
