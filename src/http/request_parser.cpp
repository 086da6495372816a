#include "message_engine.h"
#include "rondel/http/parser.h"

namespace rondel::http {

struct RequestParser::Impl {
  explicit Impl(const Limits& limits) : engine(HTTP_REQUEST, limits) {}
  MessageEngine engine;
};

RequestParser::RequestParser(const Limits& limits) : impl_(std::make_unique<Impl>(limits)) {}
RequestParser::~RequestParser() = default;

Step RequestParser::feed(const char* data, size_t len) noexcept {
  return impl_->engine.feed(data, len);
}

void RequestParser::reset() noexcept { impl_->engine.reset(false); }

const RequestHead& RequestParser::head() const noexcept { return impl_->engine.request(); }
const ParseError& RequestParser::error() const noexcept { return impl_->engine.error(); }
size_t RequestParser::head_bytes_pending() const noexcept {
  return impl_->engine.head_bytes_pending();
}
uint64_t RequestParser::body_left() const noexcept { return impl_->engine.body_left(); }
void RequestParser::skip_body(uint64_t n) noexcept { impl_->engine.skip_body(n); }
bool RequestParser::last_chunk_seen() const noexcept { return impl_->engine.last_chunk_seen(); }

}  // namespace rondel::http
