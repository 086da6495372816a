// BodyKey: reading a body key (llm_prefix) under the per-request and global caps, and replaying
// the held bytes as the exchange's body source.
#include "rondel/proxy/body_key.h"

#include <algorithm>
#include <cstdio>

#include "rondel/core/hash.h"
#include "rondel/util/ascii.h"

namespace rondel::proxy {

namespace {

// The media type of a Content-Type value, without parameters or surrounding space.
std::string_view media_type(std::string_view v) noexcept {
  v = v.substr(0, v.find(';'));
  while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
  while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
  return v;
}

// application/json, or any type with the +json suffix (RFC 6839), in any case.
bool is_json(std::string_view type) noexcept {
  if (util::iequals(type, "application/json")) return true;
  return type.size() > 5 && util::iequals(type.substr(type.size() - 5), "+json");
}

int write_hex(char* out, size_t size, char tag, uint64_t v) noexcept {
  return std::snprintf(out, size, "%c:%016llx", tag, static_cast<unsigned long long>(v));
}

}  // namespace

bool BodyBudget::take(uint64_t n, uint64_t limit) noexcept {
  uint64_t cur = held_.load(std::memory_order_relaxed);
  do {
    if (cur + n > limit) return false;
  } while (!held_.compare_exchange_weak(cur, cur + n, std::memory_order_relaxed));
  return true;
}

HeadKey check_head(const config::LlmPrefixConfig& cfg, const http::RequestHead& head) noexcept {
  HeadKey k;
  for (const config::LlmExplicitKey& e : cfg.explicit_keys) {
    if (e.where != config::LlmExplicitKey::Where::kHeader) continue;
    for (const http::Header& h : head.headers) {
      if (!h.value.empty() && util::iequals(h.name, e.name)) {
        k.source = BodyKeySource::kExplicit;
        k.value = h.value;
        return k;
      }
    }
  }
  if (head.framing == http::Framing::kNone ||
      (head.framing == http::Framing::kLength && head.content_length == 0)) {
    k.source = BodyKeySource::kNoBody;
    return k;
  }
  for (const http::Header& h : head.headers) {
    if (util::iequals(h.name, "content-encoding") && !util::iequals(h.value, "identity")) {
      k.source = BodyKeySource::kEncoding;
      return k;
    }
    if (util::iequals(h.name, "content-type") && !is_json(media_type(h.value))) {
      k.source = BodyKeySource::kContentType;
      return k;
    }
  }
  k.read_body = true;
  return k;
}

void BodyKey::begin(const LlmKeyOptions& opts, uint64_t max_buffer, uint64_t budget,
                    BodySource* source) noexcept {
  end();
  source_ = source;
  max_buffer_ = max_buffer;
  budget_ = budget;
  held_.clear();
  sent_ = 0;
  result_ = BodyKeyResult{};
  key_len_ = tenant_len_ = 0;
  reading_ = true;
  blocks_mode_ = opts.conversation == LlmAnchor::kBlocks;
  scanner_.reset(opts);
}

BodyKey::Step BodyKey::pump() noexcept {
  while (reading_) {
    const BodyView v = source_->peek();
    if (!v.bytes.empty()) {
      // At most kFeedStep at a time: the scanner stops at the anchors, and what is held past
      // them is less than one step.
      const size_t n = std::min<uint64_t>(std::min(v.bytes.size(), kFeedStep),
                                          max_buffer_ - held_.size());
      if (!BodyBudget::take(n, budget_)) {
        decide(BodyKeySource::kBufferBudget);
        break;
      }
      reserved_ += n;
      try {
        held_.append(v.bytes.data(), n);
      } catch (...) {  // out of memory: route on what is known, hold nothing more
        decide(BodyKeySource::kBufferBudget);
        break;
      }
      source_->consume(n);
      const LlmScan s = scanner_.feed(v.bytes.substr(0, n), false);
      if (s != LlmScan::kMore) {
        decide(s == LlmScan::kInvalid ? BodyKeySource::kInvalid : BodyKeySource::kNoPrompt);
      } else if (held_.size() >= max_buffer_) {
        decide(BodyKeySource::kMaxBuffer);
      }
      continue;
    }
    switch (v.state) {
      case BodyState::kEnd: {
        const LlmScan s = scanner_.feed({}, true);
        decide(s == LlmScan::kInvalid ? BodyKeySource::kInvalid : BodyKeySource::kNoPrompt);
        break;
      }
      case BodyState::kFailed:
        reading_ = false;
        return Step::kFailed;
      case BodyState::kMore:
        if (source_->want_more()) continue;
        return Step::kWait;
    }
  }
  return Step::kDecided;
}

// `otherwise`: the fallback when the scanner knows no key (why reading stopped).
void BodyKey::decide(BodyKeySource otherwise) noexcept {
  reading_ = false;
  const LlmKeys& k = scanner_.keys();
  result_.offset = held_.size();
  if (k.explicit_key) {
    result_.source = BodyKeySource::kExplicit;
    result_.hash = core::hash64(scanner_.explicit_value());
  } else if (k.has_conversation) {
    const bool blocks = blocks_mode_ || k.form == LlmKeys::Form::kPrompt;
    result_.source = blocks ? BodyKeySource::kBlocks : BodyKeySource::kAnchor;
    result_.hash = k.conversation;
    result_.grouped = k.has_tenant;
    result_.tenant = k.tenant;
    if (k.anchor_offset > 0) result_.offset = k.anchor_offset;
  } else if (k.has_tenant) {
    result_.source = BodyKeySource::kTenant;
    result_.hash = k.tenant;
  } else {
    result_.source = otherwise;
  }
  set_texts();
}

void BodyKey::set_texts() noexcept {
  if (is_fallback(result_.source)) return;
  const char tag = result_.source == BodyKeySource::kExplicit ? 'x'
                   : result_.source == BodyKeySource::kTenant ? 't'
                                                               : 'c';
  key_len_ = static_cast<uint8_t>(write_hex(key_text_.data(), key_text_.size(), tag, result_.hash));
  if (result_.grouped) {
    tenant_len_ = static_cast<uint8_t>(
        write_hex(tenant_text_.data(), tenant_text_.size(), 't', result_.tenant));
  }
}

void BodyKey::release_hold() noexcept {
  if (reserved_ > 0) BodyBudget::give(reserved_);
  reserved_ = 0;
  held_.clear();
  sent_ = 0;
  if (held_.capacity() > kMaxPooledHold) std::string().swap(held_);
}

void BodyKey::end() noexcept {
  reading_ = false;
  release_hold();
}

BodyView BodyKey::peek() noexcept {
  if (sent_ < held_.size()) {
    return BodyView{std::string_view(held_).substr(sent_), BodyState::kMore};
  }
  return source_->peek();
}

void BodyKey::consume(size_t n) noexcept {
  if (sent_ < held_.size()) {
    sent_ += n;
    return;
  }
  source_->consume(n);
}

bool BodyKey::want_more() noexcept {
  if (sent_ < held_.size()) return true;
  release_hold();  // every held byte was written to the backend: the decision is done with them
  return source_->want_more();
}

int BodyKey::body_splice_fd(uint64_t min, uint64_t* bytes) noexcept {
  if (sent_ < held_.size()) return -1;
  return source_->body_splice_fd(min, bytes);
}

BodySource::SpliceChunk BodyKey::body_splice_next_chunk(uint64_t min) noexcept {
  if (sent_ < held_.size()) return {};
  return source_->body_splice_next_chunk(min);
}

}  // namespace rondel::proxy
