// LogSink and Logger: buffered line logging with a rate limit for the data path.
#include "rondel/proxy/log.h"

#include <cerrno>
#include <ctime>

namespace rondel::proxy {

bool parse_level(std::string_view text, Level& out) noexcept {
  if (text == "debug") out = Level::kDebug;
  else if (text == "info") out = Level::kInfo;
  else if (text == "warn") out = Level::kWarn;
  else if (text == "error") out = Level::kError;
  else return false;
  return true;
}

LogSink::~LogSink() {
  flush();
  if (owned_ && file_ != nullptr) std::fclose(file_);
}

bool LogSink::open(const std::string& path, FILE* default_stream) {
  if (owned_ && file_ != nullptr) std::fclose(file_);
  file_ = nullptr;
  owned_ = false;
  path_ = path;
  if (path.empty()) return true;
  if (path == "-") {
    file_ = default_stream;
    return true;
  }
  file_ = std::fopen(path.c_str(), "ae");
  if (file_ == nullptr) return false;
  owned_ = true;
  // A large buffer: lines are written in batches by flush() from the owner's timer.
  std::setvbuf(file_, nullptr, _IOFBF, 1 << 16);
  return true;
}

bool LogSink::reopen() {
  if (!owned_) return true;
  return open(path_, nullptr);
}

void LogSink::write(std::string_view line) noexcept {
  if (file_ != nullptr) std::fwrite(line.data(), 1, line.size(), file_);
}

void LogSink::flush() noexcept {
  if (file_ != nullptr) std::fflush(file_);
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
