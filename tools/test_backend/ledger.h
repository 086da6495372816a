// Ledger appends one line per request a backend received to a file, so tests can prove how many
// times a request (a POST, say) reached the backends.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "rondel/core/result.h"

namespace rondel::test_backend {

class Ledger {
 public:
  Ledger() = default;
  Ledger(const Ledger&) = delete;
  Ledger& operator=(const Ledger&) = delete;
  ~Ledger();

  // Opens `path` for appending (created if missing). Several backends may share one file: each
  // line is written with a single O_APPEND write, so lines never interleave.
  core::Result<bool> open(const std::string& path);

  bool is_open() const noexcept { return fd_ >= 0; }

  // Appends "<request_id or -> <method> <target> <body_bytes>\n". Blocking write to the file
  // (the line is on disk cache before the response is sent); no-op when not open.
  void append(std::string_view request_id, std::string_view method, std::string_view target,
              uint64_t body_bytes) noexcept;

 private:
  int fd_ = -1;
  std::string line_;  // Reused between appends.
};

}  // namespace rondel::test_backend
