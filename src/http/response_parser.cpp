#include "message_engine.h"
#include "rondel/http/parser.h"

namespace rondel::http {

struct ResponseParser::Impl {
  explicit Impl(const Limits& limits) : engine(HTTP_RESPONSE, limits) {}
  MessageEngine engine;
};

ResponseParser::ResponseParser(const Limits& limits) : impl_(std::make_unique<Impl>(limits)) {}
ResponseParser::~ResponseParser() = default;

void ResponseParser::begin(bool request_was_head) noexcept {
  impl_->engine.reset(request_was_head);
}

Step ResponseParser::feed(const char* data, size_t len) noexcept {
  return impl_->engine.feed(data, len);
}

Step ResponseParser::finish() noexcept { return impl_->engine.finish(); }

uint64_t ResponseParser::body_left() const noexcept { return impl_->engine.body_left(); }
void ResponseParser::skip_body(uint64_t n) noexcept { impl_->engine.skip_body(n); }
bool ResponseParser::last_chunk_seen() const noexcept { return impl_->engine.last_chunk_seen(); }

const ResponseHead& ResponseParser::head() const noexcept { return impl_->engine.response(); }
const ParseError& ResponseParser::error() const noexcept { return impl_->engine.error(); }

}  // namespace rondel::http
