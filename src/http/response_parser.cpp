#include <algorithm>

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

uint64_t ResponseParser::length_body_left() const noexcept {
  return impl_->engine.length_body_left();
}

void ResponseParser::skip_body(uint64_t n) noexcept {
  // The engine only counts body bytes (llhttp never reads them), so zeros stand in for them.
  static const char kZeros[64 * 1024] = {};
  while (n > 0) {
    Step st = impl_->engine.feed(kZeros, static_cast<size_t>(std::min<uint64_t>(n, sizeof kZeros)));
    if (st.event == Event::kError || st.consumed == 0) return;
    n -= st.consumed;
  }
}

const ResponseHead& ResponseParser::head() const noexcept { return impl_->engine.response(); }
const ParseError& ResponseParser::error() const noexcept { return impl_->engine.error(); }

}  // namespace rondel::http
