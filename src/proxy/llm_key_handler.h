// The llm_prefix scanner's internals (src/proxy only): one chain of 64-byte blocks, and the
// Boost.JSON basic_parser handler that maps a body's fields onto the canonical stream.
#pragma once

#include <xxhash.h>

#include <algorithm>
#include <array>
#include <boost/json/basic_parser.hpp>
#include <cstring>

#include "rondel/core/hash.h"
#include "rondel/proxy/llm_key.h"

namespace rondel::proxy {

// Named, not anonymous: LlmKeyScanner::Impl holds a parser of the handler below.
namespace llm_key_impl {

namespace json = boost::json;

constexpr uint64_t kChainSeed = 0x6c6c6d5f70726566ull;  // "llm_pref"
constexpr char kMediaTag = static_cast<char>(0xFC);
constexpr char kPartSep = static_cast<char>(0xFD);
constexpr char kRecordEnd = static_cast<char>(0xFE);
constexpr char kRoleSep = static_cast<char>(0xFF);
constexpr size_t kMaxName = 64;  // field names and roles compared on this many bytes
constexpr size_t kBlock = 64;

// One chain of 64-byte blocks (llm_key.h): its state, the partial block, and optionally the
// anchor captured when it reaches `capture_at` blocks.
struct Chain {
  uint64_t state = kChainSeed;
  uint32_t blocks = 0;
  uint32_t fill = 0;
  uint32_t capture_at = 0;  // 0: capture nothing
  bool captured = false;
  uint64_t capture = 0;
  std::array<char, kBlock> buf;

  uint64_t anchor() const noexcept { return core::hash64({buf.data(), fill}, state + fill); }
  void block_done() noexcept {
    ++blocks;
    if (blocks == capture_at) {
      captured = true;
      capture = anchor();
    }
  }
  void push(const char* p, size_t n) noexcept {
    while (n != 0) {
      if (fill == 0 && n >= kBlock) {  // whole blocks straight from the input
        state = core::hash64({p, kBlock}, state);
        block_done();
        p += kBlock;
        n -= kBlock;
        continue;
      }
      const size_t take = std::min(n, kBlock - fill);
      std::memcpy(buf.data() + fill, p, take);
      fill += static_cast<uint32_t>(take);
      p += take;
      n -= take;
      if (fill == kBlock) {
        state = core::hash64({buf.data(), kBlock}, state);
        fill = 0;
        block_done();
      }
    }
  }
  void push(std::string_view s) noexcept { push(s.data(), s.size()); }
};

// A bounded copy of a short string (a field name, a role, an explicit value).
template <size_t N>
struct ShortString {
  std::array<char, N> buf;
  size_t size = 0;
  void clear() noexcept { size = 0; }
  void append(std::string_view s) noexcept {
    const size_t take = std::min(s.size(), N - size);
    std::memcpy(buf.data() + size, s.data(), take);
    size += take;
  }
  std::string_view view() const noexcept { return {buf.data(), size}; }
};

// What a container is, by where it sits.
enum class Ctx : uint8_t {
  kTop,
  kMessages,
  kMessage,
  kContent,
  kPart,
  kMedia,
  kSystemArr,
  kPrompt,
  kPromptSub,
  kSkip
};
// What a field name means (the context decides whether it matters).
enum class Key : uint8_t {
  kOther,
  kMessages,
  kInput,
  kPrompt,
  kSystem,
  kInstructions,
  kRole,
  kContent,
  kText,
  kMedia,
  kExplicit
};
struct KeyName {
  std::string_view name;
  Key key;
};
constexpr KeyName kKeyNames[] = {
    {"messages", Key::kMessages},
    {"input", Key::kInput},
    {"prompt", Key::kPrompt},
    {"system", Key::kSystem},
    {"instructions", Key::kInstructions},
    {"role", Key::kRole},
    {"content", Key::kContent},
    {"text", Key::kText},
    {"url", Key::kMedia},
    {"data", Key::kMedia},
    {"image_url", Key::kMedia},
    {"file_data", Key::kMedia},
    {"file_id", Key::kMedia},
    {"file_url", Key::kMedia},
};
constexpr bool top_level_key(Key k) noexcept {
  return k == Key::kMessages || k == Key::kInput || k == Key::kPrompt || k == Key::kSystem ||
         k == Key::kInstructions;
}

struct Frame {
  Ctx ctx;
  Key key = Key::kOther;  // objects: the key whose value comes next
  uint8_t explicit_index = 0;
};

// What the string being read is.
enum class Sink : uint8_t {
  kIgnore,
  kText,
  kMedia,
  kRole,
  kExplicit,
  kSystemText,
  kUserText,
  kPromptText
};
// Where the current record's bytes go: the S chain, the M chain, or both while a leading
// message's role is not known yet (resolved when it is).
enum class Target : uint8_t { kNone, kS, kM, kBoth };
// Which key holds the conversation.
enum class Conv : uint8_t { kNone, kMessages, kInput, kPrompt };

// The parser's handler: all of the scan's state. Every callback returns false to stop the parse,
// either because everything is known (done_) or because the body is refused (invalid_).
class LlmKeyHandler {
 public:
  static constexpr size_t max_object_size = size_t(-1);
  static constexpr size_t max_array_size = size_t(-1);
  static constexpr size_t max_key_size = size_t(-1);
  static constexpr size_t max_string_size = size_t(-1);

  LlmKeyHandler() noexcept { media_ = XXH3_createState(); }
  ~LlmKeyHandler() { XXH3_freeState(media_); }
  LlmKeyHandler(const LlmKeyHandler&) = delete;
  LlmKeyHandler& operator=(const LlmKeyHandler&) = delete;

  void reset(const LlmKeyOptions& o) noexcept;
  bool done() const noexcept { return done_; }
  bool invalid() const noexcept { return invalid_ || media_ == nullptr; }
  void publish(uint64_t fed) noexcept;
  const LlmKeys& keys() const noexcept { return keys_; }
  std::string_view explicit_value() const noexcept { return explicit_.view(); }

  bool on_document_begin(json::error_code&) noexcept { return true; }
  bool on_document_end(json::error_code&) noexcept { return true; }
  bool on_object_begin(json::error_code& ec) noexcept { return open(true, ec); }
  bool on_object_end(size_t, json::error_code& ec) noexcept { return close(ec); }
  bool on_array_begin(json::error_code& ec) noexcept { return open(false, ec); }
  bool on_array_end(size_t, json::error_code& ec) noexcept { return close(ec); }
  bool on_key_part(json::string_view s, size_t, json::error_code&) noexcept {
    name_.append(s);
    return true;
  }
  bool on_key(json::string_view s, size_t n, json::error_code&) noexcept {
    name_.append(s);
    classify_key(n);
    name_.clear();
    return true;
  }
  bool on_string_part(json::string_view s, size_t, json::error_code&) noexcept {
    if (!in_string_) string_begin();
    string_bytes(s);
    return true;
  }
  bool on_string(json::string_view s, size_t, json::error_code& ec) noexcept {
    if (!in_string_) string_begin();
    string_bytes(s);
    in_string_ = false;
    if (depth_ == 0) return refuse(ec);  // a string document, not an object
    return string_end(ec);
  }
  bool on_number_part(json::string_view, json::error_code&) noexcept { return true; }
  bool on_int64(int64_t i, json::string_view, json::error_code& ec) noexcept {
    return number(static_cast<uint64_t>(i), ec);
  }
  bool on_uint64(uint64_t u, json::string_view, json::error_code& ec) noexcept {
    return number(u, ec);
  }
  bool on_double(double d, json::string_view, json::error_code& ec) noexcept {
    uint64_t bits;
    std::memcpy(&bits, &d, sizeof bits);
    return number(bits, ec);
  }
  bool on_bool(bool, json::error_code& ec) noexcept { return scalar(ec); }
  bool on_null(json::error_code& ec) noexcept { return scalar(ec); }
  bool on_comment_part(json::string_view, json::error_code&) noexcept { return false; }
  bool on_comment(json::string_view, json::error_code&) noexcept { return false; }

 private:
  Frame* top() noexcept { return depth_ == 0 ? nullptr : &frames_[depth_ - 1]; }
  bool stop(json::error_code& ec) noexcept {
    ec = json::error::extra_data;  // any error: the parse ends here; done_/invalid_ say why
    return false;
  }
  bool refuse(json::error_code& ec) noexcept {
    invalid_ = true;
    return stop(ec);
  }
  // After an event that may settle something: stops the parse once everything is known.
  bool check(json::error_code& ec) noexcept {
    if (!settled()) return true;
    done_ = true;
    return stop(ec);
  }
  bool settled() const noexcept;
  bool tenant_settled() const noexcept;
  bool conversation_settled() const noexcept;
  bool open(bool object, json::error_code& ec) noexcept;
  bool close(json::error_code& ec) noexcept;
  Ctx child_ctx(bool object) noexcept;
  void classify_key(size_t full_size) noexcept;
  void string_begin() noexcept;
  void string_bytes(std::string_view s) noexcept;
  bool string_end(json::error_code& ec) noexcept;
  bool number(uint64_t v, json::error_code& ec) noexcept;
  bool scalar(json::error_code& ec) noexcept;

  void emit(const char* p, size_t n) noexcept;
  void emit(std::string_view s) noexcept { emit(s.data(), s.size()); }
  void part_begin() noexcept {
    if (parts_++ != 0) emit(&kPartSep, 1);
  }
  void record_begin(Target t) noexcept {
    target_ = t;
    parts_ = 0;
  }
  void record_end(std::string_view role) noexcept;
  void message_begin() noexcept;
  void role_known() noexcept;
  void message_end() noexcept;
  void conversation_end() noexcept;

  const LlmKeyOptions* opts_ = nullptr;
  std::array<Frame, LlmKeyScanner::kMaxDepth + 1> frames_;
  size_t depth_ = 0;
  ShortString<kMaxName> name_;
  ShortString<kMaxName> role_;
  ShortString<LlmKeyScanner::kMaxExplicit> explicit_, explicit_tmp_;
  uint8_t explicit_tmp_index_ = 0;
  XXH3_state_t* media_ = nullptr;
  Chain s_, s_saved_, m_;
  Target target_ = Target::kNone;
  uint32_t parts_ = 0;
  Sink sink_ = Sink::kIgnore;
  bool in_string_ = false;
  Conv conv_ = Conv::kNone;
  bool system_key_ = false, instructions_key_ = false;  // top-level system part keys seen
  bool leading_ = true;  // still in the conversation's leading system messages
  bool role_is_known_ = false;
  bool s_has_ = false;  // a system record ended
  uint64_t tenant_ = 0;
  bool conv_ended_ = false;  // the conversation's array (or string) ended
  bool first_user_ = false;
  uint64_t conv_m_ = 0;  // the M chain's anchor (kFirstUser, kBlocks at the end)
  bool top_ended_ = false;
  bool done_ = false, invalid_ = false;
  LlmKeys keys_;
};

}  // namespace llm_key_impl

}  // namespace rondel::proxy
