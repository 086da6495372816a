// LogSink and Logger: buffered line logging with a rate limit for the data path.
#include "rondel/proxy/log.h"

#include <fcntl.h>
#include <unistd.h>

#include <climits>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <new>

#include "rondel/util/json_writer.h"

namespace rondel::proxy {

bool parse_level(std::string_view text, Level& out) noexcept {
  if (text == "debug") out = Level::kDebug;
  else if (text == "info") out = Level::kInfo;
  else if (text == "warn") out = Level::kWarn;
  else if (text == "error") out = Level::kError;
  else return false;
  return true;
}

bool parse_access_format(std::string_view text, AccessFormat& out) noexcept {
  if (text == "text") out = AccessFormat::kText;
  else if (text == "json") out = AccessFormat::kJson;
  else return false;
  return true;
}

namespace {

void append_num(std::string& out, uint64_t v) {
  char num[24];
  int n = std::snprintf(num, sizeof num, "%llu", static_cast<unsigned long long>(v));
  out.append(num, static_cast<size_t>(n));
}

// The record's fields in line order, as data: both formats walk this one table. An optional
// field is left out of the line when empty or 0 (the TLS fields of a plain connection, the HTTP/2
// fields of an HTTP/1 request).
struct AccessField {
  std::string_view name;
  std::string_view AccessRecord::*text;  // null for a number
  uint64_t AccessRecord::*number;
  bool optional = false;
};
constexpr AccessField kAccessFields[] = {
    {"client", &AccessRecord::client, nullptr},
    {"method", &AccessRecord::method, nullptr},
    {"target", &AccessRecord::target, nullptr},
    {"status", nullptr, &AccessRecord::status},
    {"bytes_in", nullptr, &AccessRecord::bytes_in},
    {"bytes_out", nullptr, &AccessRecord::bytes_out},
    {"pool", &AccessRecord::pool, nullptr},
    {"backend", &AccessRecord::backend, nullptr},
    {"owner", &AccessRecord::owner, nullptr},
    {"hops", nullptr, &AccessRecord::hops},
    {"attempts", nullptr, &AccessRecord::attempts},
    {"duration_us", nullptr, &AccessRecord::duration_us},
    {"outcome", &AccessRecord::outcome, nullptr},
    {"proto", &AccessRecord::proto, nullptr, true},
    {"stream", nullptr, &AccessRecord::stream, true},
    {"worker", nullptr, &AccessRecord::worker},
    {"tls_version", &AccessRecord::tls_version, nullptr, true},
    {"sni", &AccessRecord::sni, nullptr, true},
    {"tls_resumed", &AccessRecord::tls_resumed, nullptr, true},
};

}  // namespace

void format_access(const AccessRecord& r, AccessFormat format, std::string& out) {
  out.clear();
  const bool json = format == AccessFormat::kJson;
  out += json ? "{" : "access";
  bool first = true;
  for (const AccessField& f : kAccessFields) {
    if (f.optional && (f.text != nullptr ? (r.*f.text).empty() : r.*f.number == 0)) continue;
    if (json) {
      if (!first) out += ',';
      util::JsonWriter::append_string(out, f.name);
      out += ':';
    } else {
      out += ' ';
      out += f.name;
      out += '=';
    }
    first = false;
    if (f.number != nullptr) {
      append_num(out, r.*f.number);
      continue;
    }
    std::string_view v = r.*f.text;
    if (json && (v.empty() || v == "-")) out += "null";
    else if (json) util::JsonWriter::append_string(out, v);
    else out += v;
  }
  out += json ? "}\n" : "\n";
}

LogSink::~LogSink() {
  flush();
  if (owned_ && fd_ >= 0) ::close(fd_);
}

bool LogSink::open(const std::string& path, FILE* default_stream) {
  flush();
  if (owned_ && fd_ >= 0) ::close(fd_);
  fd_ = -1;
  owned_ = false;
  path_ = path;
  if (path.empty()) return true;
  if (path == "-") {
    if (default_stream == nullptr) return true;
    std::fflush(default_stream);
    fd_ = fileno(default_stream);
    return true;
  }
  fd_ = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) return false;
  owned_ = true;
  return true;
}

bool LogSink::reopen() {
  if (!owned_) return true;
  return open(path_, nullptr);
}

void LogSink::write_all(const char* p, size_t n) noexcept {
  // O_APPEND: each write(2) lands whole at the end of the file. A short write (disk full, a
  // signal) continues with the rest; an error drops the batch rather than blocking the loop.
  while (n > 0) {
    ssize_t w = ::write(fd_, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return;
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
}

void LogSink::write(std::string_view line) noexcept {
  if (fd_ < 0) return;
  if (!buf_) buf_.reset(new (std::nothrow) char[kBufferSize]);
  if (!buf_ || line.size() > kBufferSize) {
    flush();
    write_all(line.data(), line.size());
    return;
  }
  if (used_ + line.size() > kBufferSize) flush();
  std::memcpy(buf_.get() + used_, line.data(), line.size());
  used_ += line.size();
}

void LogSink::flush() noexcept {
  if (fd_ < 0 || used_ == 0) return;
  if (owned_) {
    write_all(buf_.get(), used_);
  } else {
    // stdout/stderr may be a pipe shared by several workers: only writes of at most PIPE_BUF
    // bytes are atomic there, so write whole lines in such pieces.
    const char* p = buf_.get();
    size_t n = used_;
    while (n > 0) {
      size_t piece = n;
      if (piece > PIPE_BUF) {
        const char* nl = static_cast<const char*>(memrchr(p, '\n', PIPE_BUF));
        piece = nl != nullptr ? static_cast<size_t>(nl - p) + 1 : PIPE_BUF;
      }
      write_all(p, piece);
      p += piece;
      n -= piece;
    }
  }
  used_ = 0;
}

namespace {
constexpr std::string_view kLevelNames[] = {"debug", "info", "warn", "error"};
}

void Logger::log(Level level, std::string_view msg, std::string_view kv) noexcept {
  if (!enabled(level)) return;
  char ts[32];
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  size_t n = std::strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%SZ", &tm);
  line_.assign(ts, n);
  line_ += ' ';
  line_ += kLevelNames[static_cast<int>(level)];
  line_ += ' ';
  line_ += msg;
  if (!kv.empty()) {
    line_ += ' ';
    line_ += kv;
  }
  line_ += '\n';
  sink_.write(line_);
  if (level >= Level::kWarn) sink_.flush();
}

void Logger::log_limited(Level level, uint64_t now_ms, std::string_view msg,
                         std::string_view kv) noexcept {
  if (!enabled(level)) return;
  if (now_ms - window_start_ms_ >= 1000) {
    if (suppressed_ > 0) {
      std::string s = "count=" + std::to_string(suppressed_);
      log(Level::kWarn, "log_suppressed", s);
    }
    window_start_ms_ = now_ms;
    in_window_ = 0;
    suppressed_ = 0;
  }
  if (in_window_ >= kRatePerSecond) {
    ++suppressed_;
    return;
  }
  ++in_window_;
  log(level, msg, kv);
}

}  // namespace rondel::proxy
