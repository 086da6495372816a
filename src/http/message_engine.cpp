#include "message_engine.h"

#include "rondel/http/request_rules.h"

#include <algorithm>
#include <cstring>

#include "header_rules.h"

namespace rondel::http {

namespace {

constexpr char kNoInput[1] = {0};
// What llhttp is given in place of every request method (see read_method).
constexpr std::string_view kStandInMethod = "GET";
// Chunk extensions are parsed and discarded; this bounds the bytes one chunk may carry in them.
constexpr size_t kMaxChunkExtensionBytes = 4096;
// What reset() copies over the head. Assigning RequestHead{} makes GCC build the value on the
// stack first (rep stos) and copy it from there, which was most of reset()'s time in profiles.
constexpr RequestHead kNoRequest{};
constexpr ResponseHead kNoResponse{};

bool version_supported(const llhttp_t& p) noexcept {
  return p.http_major == 1 && (p.http_minor == 0 || p.http_minor == 1);
}

// RFC 9110 9.2.2; methods are case-sensitive, and one not listed (BAN, QUERY, get) is not
// idempotent, so it is never sent twice.
bool method_is_idempotent(std::string_view method) noexcept {
  switch (method.size()) {
    case 3: return method == "GET" || method == "PUT";
    case 4: return method == "HEAD";
    case 5: return method == "TRACE";
    case 6: return method == "DELETE";
    case 7: return method == "OPTIONS";
    default: return false;
  }
}

}  // namespace

// The names differ in length, so one case-insensitive compare decides.
MessageEngine::FieldKind MessageEngine::classify_field(std::string_view name) noexcept {
  switch (name.size()) {
    case 4: return iequals(name, "Host") ? FieldKind::kHost : FieldKind::kOther;
    case 6: return iequals(name, "Expect") ? FieldKind::kExpect : FieldKind::kOther;
    case 7: return iequals(name, "Upgrade") ? FieldKind::kUpgrade : FieldKind::kOther;
    case 14:
      return iequals(name, "Content-Length") ? FieldKind::kContentLength : FieldKind::kOther;
    case 17:
      return iequals(name, "Transfer-Encoding") ? FieldKind::kTransferEncoding : FieldKind::kOther;
    default: return FieldKind::kOther;
  }
}

// Static llhttp callbacks; each forwards to the engine stored in parser->data.
struct EngineCallbacks {
  static MessageEngine& self(llhttp_t* p) noexcept { return *static_cast<MessageEngine*>(p->data); }

  static int on_url(llhttp_t* p, const char* at, size_t len) noexcept {
    self(p).append(self(p).target_, at, len);
    return 0;
  }
  static int on_status(llhttp_t* p, const char* at, size_t len) noexcept {
    self(p).append(self(p).reason_, at, len);
    return 0;
  }
  static int on_method_complete(llhttp_t* p) noexcept { return self(p).on_method_complete(); }
  static int on_version_complete(llhttp_t* p) noexcept { return self(p).on_version_complete(); }
  static int on_header_field(llhttp_t* p, const char* at, size_t len) noexcept {
    return self(p).on_header_field(at, len);
  }
  static int on_header_field_complete(llhttp_t* p) noexcept {
    return self(p).on_header_field_complete();
  }
  static int on_header_value(llhttp_t* p, const char* at, size_t len) noexcept {
    return self(p).on_header_value(at, len);
  }
  static int on_header_value_complete(llhttp_t* p) noexcept {
    return self(p).on_header_value_complete();
  }
  static int on_headers_complete(llhttp_t* p) noexcept { return self(p).on_headers_complete(); }
  static int on_body(llhttp_t* p, const char* at, size_t len) noexcept {
    return self(p).on_body(at, len);
  }
  static int on_chunk_header(llhttp_t* p) noexcept { return self(p).on_chunk_header(); }
  static int on_chunk_extension(llhttp_t* p, const char*, size_t len) noexcept {
    return self(p).on_chunk_extension(len);
  }
  static int on_chunk_complete(llhttp_t* p) noexcept { return self(p).on_chunk_complete(); }
  static int on_message_complete(llhttp_t* p) noexcept { return self(p).on_message_complete(); }
};

MessageEngine::MessageEngine(llhttp_type_t type, const Limits& limits)
    : type_(type), limits_(limits) {
  llhttp_settings_init(&settings_);
  settings_.on_url = &EngineCallbacks::on_url;
  settings_.on_status = &EngineCallbacks::on_status;
  settings_.on_method_complete = &EngineCallbacks::on_method_complete;
  settings_.on_version_complete = &EngineCallbacks::on_version_complete;
  settings_.on_header_field = &EngineCallbacks::on_header_field;
  settings_.on_header_field_complete = &EngineCallbacks::on_header_field_complete;
  settings_.on_header_value = &EngineCallbacks::on_header_value;
  settings_.on_header_value_complete = &EngineCallbacks::on_header_value_complete;
  settings_.on_headers_complete = &EngineCallbacks::on_headers_complete;
  settings_.on_body = &EngineCallbacks::on_body;
  settings_.on_chunk_header = &EngineCallbacks::on_chunk_header;
  settings_.on_chunk_extension_name = &EngineCallbacks::on_chunk_extension;
  settings_.on_chunk_extension_value = &EngineCallbacks::on_chunk_extension;
  settings_.on_chunk_complete = &EngineCallbacks::on_chunk_complete;
  settings_.on_message_complete = &EngineCallbacks::on_message_complete;
  llhttp_init(&parser_, type_, &settings_);
  parser_.data = this;
  reset(false);
}

void MessageEngine::reset(bool skip_body) noexcept {
  llhttp_reset(&parser_);
  phase_ = Phase::kHead;
  pending_ = Pending::kNone;
  method_pending_ = is_request();
  skip_body_ = skip_body;
  error_set_ = false;
  field_open_ = false;
  seen_bytes_ = false;
  error_ = ParseError{};
  storage_.clear();
  method_ = target_ = reason_ = Piece{};
  fields_.clear();
  headers_.clear();
  host_index_ = content_length_index_ = transfer_encoding_index_ = -1;
  content_length_ = 0;
  expect_continue_ = false;
  body_bytes_ = 0;
  chunk_extension_bytes_ = 0;
  in_chunk_data_ = false;
  body_ = {};
  request_ = kNoRequest;
  response_ = kNoResponse;
  scanner_.start_head(limits_.max_request_line, limits_.max_header_bytes, is_request());
}

size_t MessageEngine::head_bytes_pending() const noexcept {
  return phase_ == Phase::kHead ? scanner_.bytes() : 0;
}

void MessageEngine::append(Piece& piece, const char* at, size_t len) {
  if (len == 0) return;
  if (piece.len == 0) piece.off = static_cast<uint32_t>(storage_.size());
  storage_.append(at, len);
  piece.len += static_cast<uint32_t>(len);
}

int MessageEngine::reject(uint16_t request_status, std::string_view reason) noexcept {
  if (!error_set_) {
    error_set_ = true;
    error_.status = is_request() ? request_status : 502;
    error_.reason = reason;
  }
  return -1;
}

Step MessageEngine::fail_step(size_t consumed) noexcept {
  phase_ = Phase::kFailed;
  return Step{Event::kError, consumed, {}};
}

void MessageEngine::map_llhttp_error(llhttp_errno_t err) noexcept {
  const bool in_body = phase_ == Phase::kBody || phase_ == Phase::kTrailers;
  switch (err) {
    case HPE_INVALID_VERSION: case HPE_PAUSED_H2_UPGRADE:
      reject(505, "bad_version"); break;
    case HPE_INVALID_METHOD: reject(400, "bad_method"); break;
    case HPE_INVALID_URL: reject(400, "bad_target"); break;
    case HPE_INVALID_STATUS: reject(400, "bad_status"); break;
    case HPE_INVALID_HEADER_TOKEN: case HPE_UNEXPECTED_SPACE:
      reject(400, "invalid_header"); break;
    case HPE_INVALID_CONTENT_LENGTH: case HPE_UNEXPECTED_CONTENT_LENGTH:
      reject(400, "bad_content_length"); break;
    case HPE_INVALID_TRANSFER_ENCODING: reject(400, "bad_transfer_encoding"); break;
    case HPE_INVALID_CHUNK_SIZE: reject(400, "bad_chunk"); break;
    case HPE_PAUSED_UPGRADE: reject(501, "upgrade_refused"); break;
    case HPE_INVALID_EOF_STATE: reject(400, "truncated"); break;
    case HPE_STRICT: case HPE_CR_EXPECTED: case HPE_LF_EXPECTED:
      reject(400, in_body ? "bad_chunk" : "bad_line_ending"); break;
    default: reject(400, "bad_request"); break;
  }
}

Step MessageEngine::feed(const char* data, size_t len) noexcept {
  if (phase_ == Phase::kFailed) return Step{Event::kError, 0, {}};
  if (phase_ == Phase::kEnded) return Step{Event::kMessageEnd, 0, {}};
  if (data == nullptr || len == 0) {
    data = kNoInput;  // llhttp must never see a null pointer: it would drop an open span
    len = 0;
  }
  if (len > 0) seen_bytes_ = true;
  size_t off = 0;
  if (method_pending_) {
    if (!read_method(data, len, off)) return fail_step(off);
    if (method_pending_) return Step{Event::kNeedMore, len, {}};
  }
  for (;;) {
    const char* p = data + off;
    const size_t n = len - off;
    ScanResult scan;
    const bool scanned = scanner_.active();
    if (scanned) {
      scan = scanner_.scan(p, n);
      if (scan.failed) {
        std::string_view reason = scan.reason;
        if (!is_request() && reason == "uri_too_long") reason = "status_line_too_long";
        reject(scan.status, reason);
        return fail_step(off + scan.used);
      }
    }
    pending_ = Pending::kNone;
    body_ = {};
    const llhttp_errno_t err = llhttp_execute(&parser_, p, n);
    if (err == HPE_OK) {
      if (scanned && scan.complete) {
        reject(400, "head_end_mismatch");
        return fail_step(len);
      }
      return Step{Event::kNeedMore, len, {}};
    }
    const char* pos = llhttp_get_error_pos(&parser_);
    const size_t used = (pos >= p && pos <= p + n) ? static_cast<size_t>(pos - p) : 0;
    if (err != HPE_PAUSED) {
      if (!error_set_) map_llhttp_error(err);
      return fail_step(off + used);
    }
    llhttp_resume(&parser_);
    off += used;
    if (scanned) {
      // llhttp and the scanner must agree on where the head (or trailer section) ends.
      const bool ends_section = pending_ == Pending::kHead || pending_ == Pending::kEnd;
      if (ends_section != scan.complete || (ends_section && used != scan.used)) {
        reject(400, "head_end_mismatch");
        return fail_step(off);
      }
    }
    switch (pending_) {
      case Pending::kLastChunk:
        phase_ = Phase::kTrailers;
        scanner_.start_trailers(limits_.max_header_bytes);
        continue;
      case Pending::kHead:
        return Step{Event::kHead, off, {}};
      case Pending::kBody:
        return Step{Event::kBody, off, body_};
      case Pending::kEnd:
        phase_ = Phase::kEnded;
        return Step{Event::kMessageEnd, off, {}};
      case Pending::kNone:
        break;
    }
    reject(400, "internal");
    return fail_step(off);
  }
}

Step MessageEngine::finish() noexcept {
  switch (phase_) {
    case Phase::kFailed:
      return Step{Event::kError, 0, {}};
    case Phase::kEnded:
      return Step{Event::kMessageEnd, 0, {}};
    case Phase::kHead:
      reject(502, seen_bytes_ ? "truncated" : "no_response");
      return fail_step(0);
    case Phase::kTrailers:
      reject(502, "truncated");
      return fail_step(0);
    case Phase::kBody:
      break;
  }
  // Run the transitions that need no input (a bodiless message ends right after its head).
  Step step = feed(nullptr, 0);
  if (step.event != Event::kNeedMore) return step;
  if (response_.framing == Framing::kUntilClose) {
    phase_ = Phase::kEnded;
    return Step{Event::kMessageEnd, 0, {}};
  }
  reject(502, "truncated");
  return fail_step(0);
}

// llhttp 8.1 knows only its own list of methods and answers any other token (BAN, QUERY, a
// WebDAV or custom method) with HPE_INVALID_METHOD, while RFC 9110 9.1 allows every token. So the
// engine reads the method itself, up to the SP that ends it, and gives llhttp kStandInMethod in
// its place; llhttp parses the rest of the line and the head as usual. Nothing in llhttp's
// handling of a request depends on its method but CONNECT (refused below, on the real name):
// body framing comes from Content-Length and Transfer-Encoding alone (RFC 9112 6.3). The bytes
// still go through the head scanner first (line limit, single SP, control bytes).
bool MessageEngine::read_method(const char* data, size_t len, size_t& off) noexcept {
  const auto* sp = static_cast<const char*>(std::memchr(data, ' ', len));
  const size_t end = sp != nullptr ? static_cast<size_t>(sp - data) : len;
  size_t i = 0;
  // Empty lines before the request line (RFC 9112 2.2; the scanner checks their CRLFs).
  if (method_.len == 0) {
    while (i < end && (data[i] == '\r' || data[i] == '\n')) ++i;
  }
  const size_t start = i;
  while (i < end && rules::is_tchar(static_cast<unsigned char>(data[i]))) ++i;
  // The scanner sees the bytes up to the first one that is not a token character, and no
  // further: the verdict then depends on that prefix only, not on where the input was split.
  const ScanResult scan = scanner_.scan(data, i < end ? i + 1 : end);
  if (scan.failed) {
    reject(scan.status, scan.reason);
    off = scan.used;
    return false;
  }
  if (i != end) {
    off = i;
    reject(400, "bad_method");
    return false;
  }
  append(method_, data + start, end - start);
  off = end;
  if (sp == nullptr) return true;
  method_pending_ = false;
  if (llhttp_execute(&parser_, kStandInMethod.data(), kStandInMethod.size()) != HPE_OK) {
    reject(400, "internal");
    return false;
  }
  return true;
}

int MessageEngine::on_method_complete() noexcept {
  if (view(method_) == "CONNECT") return reject(501, "connect_refused");
  return 0;
}

int MessageEngine::on_version_complete() noexcept {
  if (!version_supported(parser_)) return reject(505, "bad_version");  // the h2 preface too
  if (!is_request()) return 0;
  const RuleVerdict v = check_target(view(method_), view(target_), TargetForms::kHttp1);
  return v ? reject(v.status, v.reason) : 0;
}

int MessageEngine::on_header_field(const char* at, size_t len) noexcept {
  if (phase_ == Phase::kTrailers) return 0;  // trailers are validated by llhttp and dropped
  if (!field_open_) {
    field_open_ = true;
    fields_.emplace_back();
  }
  append(fields_.back().name, at, len);
  return 0;
}

int MessageEngine::on_header_field_complete() noexcept {
  if (phase_ == Phase::kTrailers) return 0;
  if (!field_open_) return reject(400, "invalid_header");  // empty name: no name bytes at all
  field_open_ = false;
  if (fields_.size() > limits_.max_headers) return reject(431, "too_many_headers");
  Field& field = fields_.back();
  const std::string_view name = view(field.name);
  if (!rules::is_valid_field_name(name)) return reject(400, "invalid_header");
  const int index = static_cast<int>(fields_.size()) - 1;
  field.kind = classify_field(name);
  switch (field.kind) {
    case FieldKind::kContentLength:
      if (content_length_index_ >= 0) return reject(400, "duplicate_content_length");
      if (transfer_encoding_index_ >= 0) {
        return reject(400, "content_length_and_transfer_encoding");
      }
      content_length_index_ = index;
      break;
    case FieldKind::kTransferEncoding:
      if (content_length_index_ >= 0) {
        return reject(400, "content_length_and_transfer_encoding");
      }
      if (transfer_encoding_index_ >= 0) return reject(400, "bad_transfer_encoding");
      if (is_request() && parser_.http_minor == 0) {
        return reject(400, "transfer_encoding_in_http10");
      }
      transfer_encoding_index_ = index;
      break;
    case FieldKind::kHost:
      // Checked with the authority rule (resolve_authority) once the head is whole.
      if (is_request() && host_index_ < 0) host_index_ = index;
      break;
    case FieldKind::kUpgrade:
      if (is_request()) return reject(501, "upgrade_refused");
      break;
    case FieldKind::kExpect:
    case FieldKind::kOther:
      break;
  }
  return 0;
}

int MessageEngine::on_header_value(const char* at, size_t len) noexcept {
  if (phase_ == Phase::kTrailers || fields_.empty()) return 0;
  append(fields_.back().value, at, len);
  return 0;
}

int MessageEngine::on_header_value_complete() noexcept {
  if (phase_ == Phase::kTrailers || fields_.empty()) return 0;
  Field& field = fields_.back();
  const std::string_view raw = view(field.value);
  const std::string_view value = rules::trim_ows(raw);
  field.value.off += static_cast<uint32_t>(value.data() - raw.data());
  field.value.len = static_cast<uint32_t>(value.size());
  if (field.value.len == 0) field.value.off = 0;
  if (!rules::is_valid_field_value(value)) return reject(400, "invalid_header");
  switch (field.kind) {
    case FieldKind::kContentLength: {
      auto n = rules::parse_content_length(value);
      if (!n) return reject(400, "bad_content_length");
      content_length_ = *n;
      break;
    }
    case FieldKind::kTransferEncoding:
      if (!iequals(value, "chunked")) return reject(400, "bad_transfer_encoding");
      break;
    case FieldKind::kExpect:
      if (iequals(value, "100-continue")) expect_continue_ = true;
      break;
    case FieldKind::kHost:
    case FieldKind::kUpgrade:
    case FieldKind::kOther:
      break;
  }
  return 0;
}

int MessageEngine::on_headers_complete() noexcept {
  headers_.reserve(fields_.size());
  for (const Field& f : fields_) headers_.push_back(Header{view(f.name), view(f.value)});
  hop_by_hop_.mark(headers_);
  const int rc = is_request() ? finish_request_head() : finish_response_head();
  if (rc != 0) return rc;
  phase_ = Phase::kBody;
  scanner_.stop();
  pending_ = Pending::kHead;
  return HPE_PAUSED;
}

// Our reading of the framing must be llhttp's, or the two could disagree on where the body ends.
// Example: llhttp does not take "chunked<HTAB>" as chunked although the value trims to "chunked".
int MessageEngine::check_framing_agrees() noexcept {
  const bool ll_chunked = (parser_.flags & F_CHUNKED) != 0;
  const bool ll_length = (parser_.flags & F_CONTENT_LENGTH) != 0;
  if (ll_chunked != (transfer_encoding_index_ >= 0)) return reject(400, "bad_transfer_encoding");
  if (ll_length != (content_length_index_ >= 0) ||
      (ll_length && parser_.content_length != content_length_)) {
    return reject(400, "bad_content_length");
  }
  return 0;
}

int MessageEngine::finish_request_head() noexcept {
  if (!version_supported(parser_)) return reject(505, "bad_version");
  if (parser_.http_minor == 1 && host_index_ < 0) return reject(400, "missing_host");
  RequestHead& h = request_;
  h.method = view(method_);
  h.target = view(target_);
  h.version_major = parser_.http_major;
  h.version_minor = parser_.http_minor;
  h.headers = headers_;
  if (const RuleVerdict v = resolve_authority(h, headers_, {}, false)) {
    return reject(v.status, v.reason);
  }
  if (transfer_encoding_index_ >= 0) {
    h.framing = Framing::kChunked;
  } else if (content_length_index_ >= 0) {
    h.framing = Framing::kLength;
    h.content_length = content_length_;
  }
  if (check_framing_agrees() != 0) return -1;
  if (h.framing == Framing::kLength && limits_.max_body_bytes != 0 &&
      content_length_ > limits_.max_body_bytes) {
    return reject(413, "body_too_large");
  }
  h.keep_alive = llhttp_should_keep_alive(&parser_) != 0;
  h.expect_continue = expect_continue_;
  h.is_head = h.method == "HEAD";
  h.idempotent = method_is_idempotent(h.method);
  return 0;
}

int MessageEngine::finish_response_head() noexcept {
  if (!version_supported(parser_)) return reject(502, "bad_version");
  const uint16_t status = parser_.status_code;
  if (status == 101) return reject(502, "upgrade_refused");
  if (status < 100 || status > 999) return reject(502, "bad_status");
  ResponseHead& h = response_;
  h.status = status;
  h.reason = view(reason_);
  h.version_major = parser_.http_major;
  h.version_minor = parser_.http_minor;
  h.headers = headers_;
  if (check_framing_agrees() != 0) return -1;
  const bool no_body = skip_body_ || status / 100 == 1 || status == 204 || status == 304;
  if (no_body) {
    parser_.flags |= F_SKIPBODY;  // what returning 1 from on_headers_complete does
    h.framing = Framing::kNone;
  } else if (transfer_encoding_index_ >= 0) {
    h.framing = Framing::kChunked;
  } else if (content_length_index_ >= 0) {
    h.framing = Framing::kLength;
    h.content_length = content_length_;
    if (limits_.max_body_bytes != 0 && content_length_ > limits_.max_body_bytes) {
      return reject(502, "body_too_large");
    }
  } else {
    h.framing = Framing::kUntilClose;
  }
  h.keep_alive = llhttp_should_keep_alive(&parser_) != 0;
  return 0;
}

int MessageEngine::on_body(const char* at, size_t len) noexcept {
  if (len == 0) return 0;
  body_bytes_ += len;
  if (limits_.max_body_bytes != 0 && body_bytes_ > limits_.max_body_bytes) {
    return reject(413, "body_too_large");
  }
  body_ = std::string_view(at, len);
  pending_ = Pending::kBody;
  return HPE_PAUSED;
}

int MessageEngine::on_chunk_header() noexcept {
  chunk_extension_bytes_ = 0;
  const uint64_t size = parser_.content_length;
  if (size == 0) {
    pending_ = Pending::kLastChunk;
    return HPE_PAUSED;
  }
  if (limits_.max_body_bytes != 0 &&
      (body_bytes_ > limits_.max_body_bytes || size > limits_.max_body_bytes - body_bytes_)) {
    return reject(413, "body_too_large");
  }
  in_chunk_data_ = true;
  return 0;
}

void MessageEngine::skip_body(uint64_t n) noexcept {
  // llhttp only counts body bytes (it never reads them), so zeros stand in for them.
  static const char kZeros[64 * 1024] = {};
  while (n > 0) {
    Step st = feed(kZeros, static_cast<size_t>(std::min<uint64_t>(n, sizeof kZeros)));
    if (st.event == Event::kError || st.consumed == 0) return;
    n -= st.consumed;
  }
}

int MessageEngine::on_chunk_complete() noexcept {
  in_chunk_data_ = false;
  return 0;
}

int MessageEngine::on_chunk_extension(size_t len) noexcept {
  chunk_extension_bytes_ += len;
  if (chunk_extension_bytes_ > kMaxChunkExtensionBytes) return reject(400, "bad_chunk");
  return 0;
}

int MessageEngine::on_message_complete() noexcept {
  pending_ = Pending::kEnd;
  return HPE_PAUSED;
}

}  // namespace rondel::http
