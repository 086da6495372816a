// The llm_prefix body scanner: a Boost.JSON basic_parser handler that maps chat, Anthropic,
// Responses and prompt bodies onto the canonical stream and its two block chains (llm_key.h).
#include "rondel/proxy/llm_key.h"

#include <boost/json/basic_parser_impl.hpp>

#include "llm_key_handler.h"

namespace rondel::proxy {

namespace llm_key_impl {

void LlmKeyHandler::reset(const LlmKeyOptions& o) noexcept {
  opts_ = &o;
  depth_ = 0;
  name_.clear();
  role_.clear();
  explicit_.clear();
  explicit_tmp_.clear();
  s_ = Chain{};
  s_saved_ = Chain{};
  m_ = Chain{};
  if (o.conversation == LlmAnchor::kBlocks)
    m_.capture_at = std::max<uint32_t>(1, o.conversation_blocks);
  target_ = Target::kNone;
  parts_ = 0;
  sink_ = Sink::kIgnore;
  in_string_ = false;
  conv_ = Conv::kNone;
  system_key_ = instructions_key_ = false;
  leading_ = true;
  role_is_known_ = false;
  s_has_ = false;
  tenant_ = 0;
  conv_ended_ = false;
  first_user_ = false;
  conv_m_ = 0;
  top_ended_ = false;
  done_ = invalid_ = false;
  keys_ = LlmKeys{};
}

void LlmKeyHandler::emit(const char* p, size_t n) noexcept {
  switch (target_) {
    case Target::kS:
      s_.push(p, n);
      break;
    case Target::kM:
      m_.push(p, n);
      break;
    case Target::kBoth:
      s_.push(p, n);
      m_.push(p, n);
      break;
    case Target::kNone:
      break;
  }
}

void LlmKeyHandler::record_end(std::string_view role) noexcept {
  emit(&kRoleSep, 1);
  emit(role);
  emit(&kRecordEnd, 1);
  if (target_ == Target::kS) {
    s_has_ = true;
    tenant_ = s_.anchor();
  }
  target_ = Target::kNone;
}

// A message of the conversation array: while the leading system messages last, its bytes go to
// both chains until its role is known (SDKs send `content` before `role`).
void LlmKeyHandler::message_begin() noexcept {
  role_.clear();
  role_is_known_ = false;
  if (leading_) {
    s_saved_ = s_;
    record_begin(Target::kBoth);
  } else {
    record_begin(Target::kM);
  }
}

bool is_system_role(std::string_view r) noexcept {
  return r == "system" || r == "developer";
}

void LlmKeyHandler::role_known() noexcept {
  role_is_known_ = true;
  if (target_ != Target::kBoth) return;
  if (is_system_role(role_.view())) {
    const uint32_t capture_at = m_.capture_at;
    m_ = Chain{};
    m_.capture_at = capture_at;
    target_ = Target::kS;
  } else {
    s_ = s_saved_;
    target_ = Target::kM;
    leading_ = false;
  }
}

void LlmKeyHandler::message_end() noexcept {
  if (!role_is_known_) role_known();  // no role: "" (not a system message)
  const bool user = role_.view() == "user";
  record_end(is_system_role(role_.view()) ? std::string_view("system") : role_.view());
  if (user && !first_user_) {
    first_user_ = true;
    if (opts_->conversation == LlmAnchor::kFirstUser) conv_m_ = m_.anchor();
  }
}

void LlmKeyHandler::conversation_end() noexcept {
  conv_ended_ = true;
  leading_ = false;
  if (conv_ == Conv::kPrompt || opts_->conversation == LlmAnchor::kBlocks) {
    conv_m_ = m_.captured ? m_.capture : m_.anchor();
  }
}

bool LlmKeyHandler::tenant_settled() const noexcept {
  if (top_ended_ || conv_ == Conv::kPrompt) return true;
  // The conversation's leading system messages are over, and a system part was seen: a body
  // without one may still carry a top-level `system`/`instructions` later.
  return conv_ != Conv::kNone && (!leading_ || conv_ended_) && s_has_;
}

bool LlmKeyHandler::conversation_settled() const noexcept {
  if (top_ended_) return true;
  if (conv_ == Conv::kNone) return false;
  if (conv_ended_) return true;
  if (conv_ == Conv::kPrompt) return m_.captured;
  switch (opts_->conversation) {
    case LlmAnchor::kFirstUser:
      return first_user_;
    case LlmAnchor::kSystem:
      return tenant_settled();
    case LlmAnchor::kBlocks:
      return m_.captured && target_ != Target::kBoth;
  }
  return false;
}

bool LlmKeyHandler::settled() const noexcept {
  if (top_ended_) return true;
  if (!opts_->explicit_fields.empty() && !(keys_.explicit_key && keys_.explicit_index == 0)) {
    return false;
  }
  return conversation_settled() && tenant_settled();
}

void LlmKeyHandler::classify_key(size_t full_size) noexcept {
  Frame* f = top();
  f->key = Key::kOther;
  if (full_size > kMaxName) return;
  const std::string_view name = name_.view();
  if (f->ctx == Ctx::kTop) {
    const auto& fields = opts_->explicit_fields;
    for (size_t i = 0; i < fields.size() && i < 256; ++i) {
      if (fields[i] == name) {
        f->key = Key::kExplicit;
        f->explicit_index = static_cast<uint8_t>(i);
        return;
      }
    }
  }
  for (const KeyName& k : kKeyNames) {
    if (k.name == name) {
      if (top_level_key(k.key) != (f->ctx == Ctx::kTop)) return;
      f->key = k.key;
      return;
    }
  }
}

// The context of a container opening inside the current one (and what its opening starts).
Ctx LlmKeyHandler::child_ctx(bool object) noexcept {
  const Frame& p = *top();
  switch (p.ctx) {
    case Ctx::kTop:
      if (object) return Ctx::kSkip;
      if ((p.key == Key::kMessages || p.key == Key::kInput) && conv_ == Conv::kNone) {
        conv_ = p.key == Key::kMessages ? Conv::kMessages : Conv::kInput;
        return Ctx::kMessages;
      }
      if (p.key == Key::kPrompt && conv_ == Conv::kNone) {
        conv_ = Conv::kPrompt;
        const uint32_t n = std::max<uint32_t>(1, opts_->conversation_blocks);
        m_.capture_at = n;
        record_begin(Target::kM);
        return Ctx::kPrompt;
      }
      if (p.key == Key::kSystem && !system_key_) {
        system_key_ = true;
        record_begin(Target::kS);
        return Ctx::kSystemArr;
      }
      return Ctx::kSkip;
    case Ctx::kMessages:
      if (!object) return Ctx::kSkip;
      message_begin();
      return Ctx::kMessage;
    case Ctx::kMessage:
      return !object && p.key == Key::kContent ? Ctx::kContent : Ctx::kSkip;
    case Ctx::kContent:
    case Ctx::kSystemArr:
      return object ? Ctx::kPart : Ctx::kSkip;
    case Ctx::kPart:
    case Ctx::kMedia:
      return object ? Ctx::kMedia : Ctx::kSkip;
    case Ctx::kPrompt:
      if (object) return Ctx::kSkip;
      part_begin();
      return Ctx::kPromptSub;
    case Ctx::kPromptSub:
    case Ctx::kSkip:
      return Ctx::kSkip;
  }
  return Ctx::kSkip;
}

bool LlmKeyHandler::open(bool object, json::error_code& ec) noexcept {
  if (depth_ == 0) {
    if (!object) return refuse(ec);  // the body must be an object
    frames_[depth_++] = Frame{Ctx::kTop};
    return true;
  }
  if (depth_ >= frames_.size()) return refuse(ec);  // the parser's max_depth stops it first
  const Ctx ctx = child_ctx(object);
  frames_[depth_++] = Frame{ctx};
  return true;
}

bool LlmKeyHandler::close(json::error_code& ec) noexcept {
  const Ctx ctx = frames_[--depth_].ctx;
  switch (ctx) {
    case Ctx::kTop:
      top_ended_ = true;
      break;
    case Ctx::kMessages:
      conversation_end();
      break;
    case Ctx::kMessage:
      message_end();
      break;
    case Ctx::kSystemArr:
      record_end("system");
      break;
    case Ctx::kPrompt:
      target_ = Target::kNone;
      conversation_end();
      break;
    default:
      return true;
  }
  return check(ec);
}

void LlmKeyHandler::string_begin() noexcept {
  in_string_ = true;
  sink_ = Sink::kIgnore;
  const Frame* f = top();
  if (f == nullptr) return;  // a scalar document: refused at its end
  switch (f->ctx) {
    case Ctx::kTop:
      if (f->key == Key::kExplicit) {
        sink_ = Sink::kExplicit;
        explicit_tmp_.clear();
        explicit_tmp_index_ = f->explicit_index;
      } else if ((f->key == Key::kSystem && !system_key_) ||
                 (f->key == Key::kInstructions && !instructions_key_)) {
        (f->key == Key::kSystem ? system_key_ : instructions_key_) = true;
        sink_ = Sink::kSystemText;
        record_begin(Target::kS);
      } else if (f->key == Key::kInput && conv_ == Conv::kNone) {
        conv_ = Conv::kInput;
        sink_ = Sink::kUserText;
        record_begin(Target::kM);
      } else if (f->key == Key::kPrompt && conv_ == Conv::kNone) {
        conv_ = Conv::kPrompt;
        m_.capture_at = std::max<uint32_t>(1, opts_->conversation_blocks);
        sink_ = Sink::kPromptText;
        record_begin(Target::kM);
      }
      break;
    case Ctx::kMessage:
      if (f->key == Key::kRole && !role_is_known_) {
        sink_ = Sink::kRole;
        role_.clear();
      } else if (f->key == Key::kContent) {
        sink_ = Sink::kText;
      }
      break;
    case Ctx::kContent:
    case Ctx::kSystemArr:
    case Ctx::kPrompt:
    case Ctx::kPromptSub:
      sink_ = Sink::kText;
      break;
    case Ctx::kPart:
    case Ctx::kMedia:
      if (f->key == Key::kText && f->ctx == Ctx::kPart) sink_ = Sink::kText;
      if (f->key == Key::kMedia) {
        sink_ = Sink::kMedia;
        XXH3_64bits_reset(media_);
      }
      break;
    default:
      break;
  }
  if (sink_ == Sink::kText || sink_ == Sink::kSystemText || sink_ == Sink::kUserText ||
      sink_ == Sink::kPromptText) {
    part_begin();
  }
}

void LlmKeyHandler::string_bytes(std::string_view s) noexcept {
  switch (sink_) {
    case Sink::kIgnore:
      break;
    case Sink::kMedia:
      XXH3_64bits_update(media_, s.data(), s.size());
      break;
    case Sink::kRole:
      role_.append(s);
      break;
    case Sink::kExplicit:
      explicit_tmp_.append(s);
      break;
    default:
      emit(s);
      break;
  }
}

bool LlmKeyHandler::string_end(json::error_code& ec) noexcept {
  switch (sink_) {
    case Sink::kMedia: {
      const uint64_t d = XXH3_64bits_digest(media_);
      std::array<char, 9> tag;
      tag[0] = kMediaTag;
      for (int i = 0; i < 8; ++i) tag[1 + i] = static_cast<char>(d >> (8 * i));
      part_begin();
      emit(tag.data(), tag.size());
      return true;
    }
    case Sink::kRole:
      role_known();
      return true;
    case Sink::kExplicit:
      if (!keys_.explicit_key || explicit_tmp_index_ < keys_.explicit_index) {
        keys_.explicit_key = true;
        keys_.explicit_index = explicit_tmp_index_;
        explicit_ = explicit_tmp_;
      }
      return check(ec);
    case Sink::kSystemText:
      record_end("system");
      return check(ec);
    case Sink::kUserText:
      record_end("user");
      first_user_ = true;
      if (opts_->conversation == LlmAnchor::kFirstUser) conv_m_ = m_.anchor();
      conversation_end();
      return check(ec);
    case Sink::kPromptText:
      target_ = Target::kNone;
      conversation_end();
      return check(ec);
    default:
      return true;
  }
}

bool LlmKeyHandler::number(uint64_t v, json::error_code& ec) noexcept {
  const Frame* f = top();
  if (f == nullptr) return refuse(ec);
  if (f->ctx != Ctx::kPrompt && f->ctx != Ctx::kPromptSub) return true;
  std::array<char, 8> bytes;
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>(v >> (8 * i));
  emit(bytes.data(), bytes.size());
  return true;
}

bool LlmKeyHandler::scalar(json::error_code& ec) noexcept {
  return depth_ == 0 ? refuse(ec) : true;
}

void LlmKeyHandler::publish(uint64_t fed) noexcept {
  const bool had_tenant = keys_.has_tenant, had_conversation = keys_.has_conversation;
  const bool prompt = conv_ == Conv::kPrompt;
  keys_.has_tenant = s_has_ && !prompt;
  keys_.tenant = keys_.has_tenant ? tenant_ : 0;
  const uint64_t t = keys_.tenant;
  keys_.has_conversation = false;
  if (prompt) {
    keys_.has_conversation = conv_ended_ || m_.captured;
    keys_.conversation = conv_ended_ ? conv_m_ : m_.capture;
  } else if (opts_->conversation == LlmAnchor::kSystem) {
    keys_.has_conversation = keys_.has_tenant;
    keys_.conversation = t;
  } else if (opts_->conversation == LlmAnchor::kFirstUser) {
    keys_.has_conversation = first_user_;
    keys_.conversation = core::mix64(t, conv_m_);
  } else if (conv_ != Conv::kNone) {
    const bool at_n = m_.captured && target_ != Target::kBoth;
    keys_.has_conversation = at_n || conv_ended_;
    keys_.conversation = core::mix64(t, at_n ? m_.capture : conv_m_);
  }
  if (!keys_.has_conversation) keys_.conversation = 0;
  keys_.blocks = s_.blocks + m_.blocks;
  if (done_ || keys_.has_tenant != had_tenant || keys_.has_conversation != had_conversation) {
    keys_.anchor_offset = fed;
  }
  using Form = LlmKeys::Form;
  switch (conv_) {
    case Conv::kMessages:
      keys_.form = system_key_ ? Form::kAnthropic : Form::kChat;
      break;
    case Conv::kInput:
      keys_.form = Form::kResponses;
      break;
    case Conv::kPrompt:
      keys_.form = Form::kPrompt;
      break;
    case Conv::kNone:
      keys_.form = instructions_key_ ? Form::kResponses
                   : system_key_     ? Form::kAnthropic
                                     : Form::kNone;
      break;
  }
}

}  // namespace llm_key_impl

using llm_key_impl::LlmKeyHandler;

struct LlmKeyScanner::Impl {
  boost::json::basic_parser<LlmKeyHandler> parser{parse_options()};
  uint64_t fed = 0;
  LlmScan state = LlmScan::kMore;

  static boost::json::parse_options parse_options() noexcept {
    boost::json::parse_options o;
    o.max_depth = kMaxDepth;
    return o;
  }
};

LlmKeyScanner::LlmKeyScanner() : impl_(std::make_unique<Impl>()) {
  static const LlmKeyOptions kDefaults;
  reset(kDefaults);
}

LlmKeyScanner::~LlmKeyScanner() = default;

void LlmKeyScanner::reset(const LlmKeyOptions& o) noexcept {
  impl_->parser.reset();
  impl_->parser.handler().reset(o);
  impl_->fed = 0;
  impl_->state = impl_->parser.handler().invalid() ? LlmScan::kInvalid : LlmScan::kMore;
}

LlmScan LlmKeyScanner::feed(std::string_view bytes, bool end) noexcept {
  Impl& im = *impl_;
  if (im.state != LlmScan::kMore) return im.state;
  LlmKeyHandler& h = im.parser.handler();
  boost::json::error_code ec;
  try {
    im.parser.write_some(!end, bytes.data(), bytes.size(), ec);
  } catch (...) {  // std::bad_alloc from the parser's stack: refuse the body, keep the loop
    ec = boost::json::error::exception;
  }
  im.fed += bytes.size();
  if (h.done()) {
    im.state = LlmScan::kDone;
  } else if (ec || h.invalid()) {
    im.state = LlmScan::kInvalid;  // a syntax error, too deep, or cut short at the end
  } else if (end) {
    im.state = LlmScan::kInvalid;  // trailing bytes after the document cannot end it unread
  }
  h.publish(im.fed);
  return im.state;
}

const LlmKeys& LlmKeyScanner::keys() const noexcept {
  return impl_->parser.handler().keys();
}

std::string_view LlmKeyScanner::explicit_value() const noexcept {
  return impl_->parser.handler().explicit_value();
}

}  // namespace rondel::proxy
