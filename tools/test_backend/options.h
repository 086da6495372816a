// Command-line options of rondel-test-backend, and the failure modes it can be told to act out.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "rondel/core/result.h"

namespace rondel::test_backend {

// FailMode is how a backend misbehaves on a request (set for all with --fail-mode, or per request
// with ?fail=MODE).
enum class FailMode {
  kNone,                 // Answer normally.
  kCloseBeforeResponse,  // Read the whole request, then close without answering.
  kResetAfterRequest,    // Read the request head, then reset the connection (RST).
  kTruncateBody,         // Advertise Content-Length N, send N/2 body bytes, then close.
  kStatus500,            // Answer 500 Internal Server Error.
  kHang,                 // Read the request and never answer.
  kBadFraming,           // Answer with both Content-Length and Transfer-Encoding: chunked.
  kExtraBytes,           // Answer validly, then send garbage bytes on the connection.
};

// How --report-load writes the backend's in-flight count on each response (the requests it
// holds when the head is written, this one excluded).
enum class LoadReportForm : uint8_t {
  kNone,
  kText,   // endpoint-load-metrics: TEXT named_metrics.in_flight=N
  kColon,  // endpoint-load-metrics: named_metrics.in_flight:N
  kJson,   // endpoint-load-metrics: JSON {"named_metrics": {"in_flight": N}}
  kPlain,  // NAME: N (--report-load header:NAME)
};

// Parses a mode name such as "truncate-body"; nullopt if unknown.
std::optional<FailMode> parse_fail_mode(std::string_view text) noexcept;

struct Options {
  std::string listen_host = "127.0.0.1";
  uint16_t listen_port = 0;
  std::string name = "backend";
  uint64_t delay_ms = 0;
  std::optional<uint64_t> size;  // Response body bytes; unset means the body is NAME "\n".
  bool chunked = false;
  FailMode fail_mode = FailMode::kNone;
  uint64_t cache_objects = 0;  // 0 disables the cache model (and the X-Cache header).
  uint64_t miss_delay_ms = 0;
  uint64_t cache_block = 0;  // >0: the cache model holds blocks of this many bytes (range.h).
  std::string ledger_path;  // Empty: no ledger.
  bool health_fail = false;
  bool checksum = false;  // Compute a CRC-32 of every request body (X-Request-Crc32).
  LoadReportForm report_form = LoadReportForm::kNone;
  std::string report_header;  // kPlain: the header name
  bool help = false;
};

// Parses argv into Options ("--opt value" or "--opt=value"); the error names the bad argument.
core::Result<Options> parse_options(int argc, char** argv);

// The --help text.
std::string_view usage() noexcept;

}  // namespace rondel::test_backend
