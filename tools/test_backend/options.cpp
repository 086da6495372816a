// Command-line parsing for rondel-test-backend.
#include "options.h"

#include <charconv>
#include <string>

namespace rondel::test_backend {

namespace {

constexpr std::string_view kUsage =
    "usage: rondel-test-backend [options]\n"
    "  --listen HOST:PORT     address to listen on (default 127.0.0.1:0; port 0 = ephemeral);\n"
    "                         the first stdout line is 'listening HOST:PORT'\n"
    "  --name NAME            sent as X-Backend on every response (default 'backend')\n"
    "  --delay-ms N           delay every response by N ms\n"
    "  --size N               response body bytes (default: NAME plus a newline)\n"
    "  --chunked              send response bodies chunked\n"
    "  --fail-mode MODE       none | close-before-response | reset-after-request |\n"
    "                         truncate-body | status-500 | hang | bad-framing | extra-bytes\n"
    "  --cache-objects C      model an LRU cache of C objects keyed by request target\n"
    "  --miss-delay-ms D      extra delay of a cache miss\n"
    "  --cache-block B        the cache model holds C blocks of B bytes of each target instead\n"
    "                         of C objects; hits and misses count blocks (a range touches\n"
    "                         blocks first/B .. last/B)\n"
    "  --ledger FILE          append '<X-Request-Id|-> <method> <target> <body bytes>' per request\n"
    "  --health-fail          /healthz answers 503 from the start\n"
    "  --checksum             add X-Request-Crc32 (CRC-32 of the request body) to responses\n"
    "  --report-load FORM     report the true in-flight count (requests held when the head is\n"
    "                         written, this one excluded) on every response: text | colon |\n"
    "                         json (endpoint-load-metrics, named_metrics.in_flight) or\n"
    "                         header:NAME (NAME: N); ?load=VALUE sends VALUE verbatim instead\n"
    "  --and                  the options that follow are another backend served by this\n"
    "                         process and its event loop (one 'listening' line each)\n"
    "Per request overrides: ?delay=MS ?size=N ?status=CODE ?chunked=0|1 ?fail=MODE ?checksum=1\n"
    "  ?load=VALUE (with --report-load)\n"
    "Range: bytes=a-b | a- | -n (one range) on an ordinary path: 206 with that slice of the body\n"
    "  (416 past its end); other Range values are ignored. /_stats bytes_out = body bytes sent\n"
    "Control: GET /_stats, /_reset, /healthz, /_health?fail=0|1, /_echo (body = raw request head)\n";

bool parse_u64(std::string_view text, uint64_t& out) noexcept {
  if (text.empty()) return false;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && ptr == text.data() + text.size();
}

// Splits "HOST:PORT", "[V6]:PORT" or ":PORT" into host and port.
bool parse_listen(std::string_view text, Options& options) {
  size_t colon = text.rfind(':');
  if (colon == std::string_view::npos) return false;
  std::string_view host = text.substr(0, colon);
  uint64_t port = 0;
  if (!parse_u64(text.substr(colon + 1), port) || port > 65535) return false;
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  options.listen_host = host.empty() ? "0.0.0.0" : std::string(host);
  options.listen_port = static_cast<uint16_t>(port);
  return true;
}

}  // namespace

std::optional<FailMode> parse_fail_mode(std::string_view text) noexcept {
  if (text == "none") return FailMode::kNone;
  if (text == "close-before-response") return FailMode::kCloseBeforeResponse;
  if (text == "reset-after-request") return FailMode::kResetAfterRequest;
  if (text == "truncate-body") return FailMode::kTruncateBody;
  if (text == "status-500") return FailMode::kStatus500;
  if (text == "hang") return FailMode::kHang;
  if (text == "bad-framing") return FailMode::kBadFraming;
  if (text == "extra-bytes") return FailMode::kExtraBytes;
  return std::nullopt;
}

std::string_view usage() noexcept { return kUsage; }

core::Result<Options> parse_options(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    std::string_view value;
    bool has_value = false;
    if (size_t eq = arg.find('='); arg.starts_with("--") && eq != std::string_view::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
      has_value = true;
    }
    // Flags without a value.
    if (arg == "--help" || arg == "-h") {
      options.help = true;
      continue;
    }
    if (arg == "--chunked" || arg == "--health-fail" || arg == "--checksum") {
      if (has_value) return core::fail(std::string(arg) + " takes no value");
      if (arg == "--chunked") options.chunked = true;
      if (arg == "--health-fail") options.health_fail = true;
      if (arg == "--checksum") options.checksum = true;
      continue;
    }
    if (!has_value) {
      if (i + 1 >= argc) return core::fail(std::string(arg) + " needs a value");
      value = argv[++i];
    }
    uint64_t number = 0;
    bool numeric = parse_u64(value, number);
    if (arg == "--listen") {
      if (!parse_listen(value, options)) return core::fail("bad --listen '" + std::string(value) + "'");
    } else if (arg == "--name") {
      if (value.empty()) return core::fail("--name must not be empty");
      for (char c : value) {
        if (static_cast<unsigned char>(c) < 0x21 || c == 0x7f) {
          return core::fail("--name must be visible characters without spaces");
        }
      }
      options.name = std::string(value);
    } else if (arg == "--delay-ms" || arg == "--size" || arg == "--cache-objects" ||
               arg == "--miss-delay-ms" || arg == "--cache-block") {
      if (!numeric) return core::fail("bad " + std::string(arg) + " '" + std::string(value) + "'");
      if (arg == "--delay-ms") options.delay_ms = number;
      if (arg == "--size") options.size = number;
      if (arg == "--cache-objects") options.cache_objects = number;
      if (arg == "--miss-delay-ms") options.miss_delay_ms = number;
      if (arg == "--cache-block") options.cache_block = number;
    } else if (arg == "--fail-mode") {
      auto mode = parse_fail_mode(value);
      if (!mode) return core::fail("unknown --fail-mode '" + std::string(value) + "'");
      options.fail_mode = *mode;
    } else if (arg == "--report-load") {
      if (value == "text") options.report_form = LoadReportForm::kText;
      else if (value == "colon") options.report_form = LoadReportForm::kColon;
      else if (value == "json") options.report_form = LoadReportForm::kJson;
      else if (value.starts_with("header:") && value.size() > 7) {
        options.report_form = LoadReportForm::kPlain;
        options.report_header = std::string(value.substr(7));
      } else {
        return core::fail("bad --report-load '" + std::string(value) +
                          "' (text, colon, json or header:NAME)");
      }
    } else if (arg == "--ledger") {
      options.ledger_path = std::string(value);
    } else {
      return core::fail("unknown option '" + std::string(arg) + "'");
    }
  }
  return options;
}

}  // namespace rondel::test_backend
