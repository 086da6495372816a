// Event and access logging: one line per event, `level msg key=value ...`, rate-limited on the
// data path, buffered and flushed by the owner's timer so logging never blocks per request.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>

namespace rondel::proxy {

enum class Level : uint8_t { kDebug, kInfo, kWarn, kError };

// Parses "debug" | "info" | "warn" | "error"; returns false for anything else.
bool parse_level(std::string_view text, Level& out) noexcept;

// How access-log lines are written: `access key=value ...` text, or one JSON object per line.
enum class AccessFormat : uint8_t { kText, kJson };

// Parses "text" | "json"; returns false for anything else.
bool parse_access_format(std::string_view text, AccessFormat& out) noexcept;

// One access-log record: the fields of one request, as views the caller keeps alive for the
// call to format_access(). "-" (or empty) stands for a field that does not apply (no backend,
// an unkeyed request has no owner).
struct AccessRecord {
  std::string_view client;
  std::string_view method = "-";
  std::string_view target = "-";
  uint64_t status = 0;
  uint64_t bytes_in = 0;
  uint64_t bytes_out = 0;
  std::string_view pool;
  std::string_view backend = "-";
  std::string_view owner = "-";  // the key's natural owner (routing); "-" when not keyed
  uint64_t hops = 0;             // ring steps past the owner (bounded-load spill)
  uint64_t attempts = 0;
  uint64_t duration_us = 0;
  std::string_view outcome;      // ok | client_abort | backend_error | timeout | rejected
  uint64_t worker = 0;
  // HTTP/2 streams only (empty / 0 on HTTP/1: left out of the line).
  std::string_view proto;        // h2
  uint64_t stream = 0;           // the stream id
  // TLS listeners only (empty on plain connections: the fields are left out of the line).
  std::string_view tls_version;  // TLSv1.2 | TLSv1.3
  std::string_view sni;          // the client's SNI name, "-" if none
  std::string_view tls_resumed;  // 1 | 0
};

// Replaces `out` with the record's line, '\n' included. Text: `access client=... worker=N`, the
// values as they are. JSON: {"client":...,"worker":N} with strings escaped per RFC 8259 (a
// target with quotes, backslashes or control bytes stays one valid object); a "-" field is
// null. Reuses `out`'s capacity: no allocation once it has grown to the longest line.
void format_access(const AccessRecord& r, AccessFormat format, std::string& out);

// A log sink: stdout/stderr ("-") or a file opened for appending (O_APPEND). Not thread-safe:
// one per loop. Lines are buffered and written with write(2) in whole lines only, so several
// sinks (one per worker) may append to the same file without ever interleaving partial lines.
class LogSink {
 public:
  LogSink() = default;
  ~LogSink();
  LogSink(const LogSink&) = delete;
  LogSink& operator=(const LogSink&) = delete;

  // Opens `path` ("" = off, "-" = the given default stream). Returns false with errno set.
  bool open(const std::string& path, FILE* default_stream);
  // Closes and reopens the same path (SIGUSR1, after log rotation).
  bool reopen();
  bool enabled() const noexcept { return fd_ >= 0; }
  // The format of the access records written to this sink (set by its owner at start).
  void set_format(AccessFormat f) noexcept { format_ = f; }
  AccessFormat format() const noexcept { return format_; }
  // Appends one line (must end with '\n') to the buffer; writes the buffer first when the line
  // would not fit. No allocation after the first call.
  void write(std::string_view line) noexcept;
  void flush() noexcept;
  static constexpr size_t kBufferSize = 64 * 1024;

 private:
  void write_all(const char* p, size_t n) noexcept;
  std::string path_;
  int fd_ = -1;
  bool owned_ = false;
  std::unique_ptr<char[]> buf_;
  size_t used_ = 0;
  AccessFormat format_ = AccessFormat::kText;
};

// The event log with a level filter and a per-second budget for data-path messages.
class Logger {
 public:
  explicit Logger(LogSink& sink, Level level = Level::kInfo) : sink_(sink), level_(level) {}
  void set_level(Level level) noexcept { level_ = level; }
  bool enabled(Level level) const noexcept { return level >= level_ && sink_.enabled(); }
  // Logs `msg` followed by key=value pairs already formatted by the caller ("k=v k2=v2").
  void log(Level level, std::string_view msg, std::string_view kv = {}) noexcept;
  // Like log(), but at most `kRatePerSecond` such lines per second; the rest are counted and
  // reported as one "suppressed" line when the next second starts. now_ms is the loop time.
  void log_limited(Level level, uint64_t now_ms, std::string_view msg,
                   std::string_view kv = {}) noexcept;
  static constexpr uint32_t kRatePerSecond = 20;

 private:
  LogSink& sink_;
  Level level_;
  uint64_t window_start_ms_ = 0;
  uint32_t in_window_ = 0;
  uint64_t suppressed_ = 0;
  std::string line_;
};

}  // namespace rondel::proxy
