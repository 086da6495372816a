// BodyKey: the routing key of a request read from its body (hash_key: llm_prefix), and the body
// source that replays the bytes read for it.
//
// The Exchange reads the body through BodyKey before it routes: every byte it takes from the
// client's BodySource is held (copied once, into a buffer kept by the pooled exchange) and fed to
// the prompt scanner (llm_key.h) until the scanner knows the anchors, the body ends, or a cap is
// reached: the pool's llm_prefix.max_buffer for this request, or the process-wide buffer_budget
// shared by every request holding bytes (BodyBudget). Then the Exchange routes on what is known,
// and BodyKey becomes the exchange's BodySource: it offers the held bytes first, then passes
// every call through to the client's source, so the rest streams (and splices) as any body does.
// The held bytes are given back (buffer and budget) once the backend took them, or when the
// exchange ends. A body is never changed: the backend receives it byte for byte.
//
// Before reading, the head decides whether there is anything to read (check_head): an explicit
// header key wins; a request without a body, with a Content-Encoding other than identity or with
// a media type that is not JSON routes by missing_key at once, counted by reason.
//
// Loop thread only. No allocation once the pooled buffer has grown to the bodies seen (it keeps
// at most kMaxPooledHold bytes of capacity between requests).
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "rondel/config/config.h"
#include "rondel/http/message.h"
#include "rondel/proxy/body_source.h"
#include "rondel/proxy/llm_key.h"

namespace rondel::proxy {

// Where a body-keyed request's key came from: the metric rondel_llm_keys_total's `source`.
enum class BodyKeySource : uint8_t {
  kExplicit,      // an explicit key (a header or a body field of llm_prefix.explicit)
  kAnchor,        // the conversation anchor (first user message, or the system part)
  kBlocks,        // the conversation anchor counted in blocks (kBlocks, or a raw prompt)
  kTenant,        // only the tenant anchor was known at a cap: placed by it alone
  // Fallbacks: routed by missing_key.
  kNoBody,        // the request has no body
  kContentType,   // a media type other than JSON
  kEncoding,      // a Content-Encoding other than identity
  kInvalid,       // the body is not a JSON object the scanner can read
  kNoPrompt,      // a JSON object with no prompt (no messages, prompt, input, system, ...)
  kMaxBuffer,     // llm_prefix.max_buffer was reached with nothing known
  kBufferBudget,  // buffer_budget was reached with nothing known
};
inline constexpr size_t kBodyKeySources = 11;
inline constexpr std::string_view kBodyKeySourceNames[kBodyKeySources] = {
    "explicit", "anchor",  "blocks",    "tenant",     "no_body",      "content_type",
    "encoding", "invalid", "no_prompt", "max_buffer", "buffer_budget"};
constexpr bool is_fallback(BodyKeySource s) noexcept { return s >= BodyKeySource::kNoBody; }

// The bytes every request together holds for body keys now: one process-wide count against
// the configured buffer_budget. take() fails rather than pass the limit.
class BodyBudget {
 public:
  static bool take(uint64_t n, uint64_t limit) noexcept;
  // The configured buffer_budget, set by the daemon from each configuration it applies.
  static void set_limit(uint64_t n) noexcept { limit_.store(n, std::memory_order_relaxed); }
  static uint64_t limit() noexcept { return limit_.load(std::memory_order_relaxed); }
  static void give(uint64_t n) noexcept { held_.fetch_sub(n, std::memory_order_relaxed); }
  static uint64_t held() noexcept { return held_.load(std::memory_order_relaxed); }

 private:
  static inline std::atomic<uint64_t> held_{0};
  static inline std::atomic<uint64_t> limit_{64u << 20};
};

// What the head alone says about a body key.
struct HeadKey {
  bool read_body = false;  // read the body (the scanner decides)
  BodyKeySource source = BodyKeySource::kNoBody;  // else: the decision (explicit, or a fallback)
  std::string_view value;  // kExplicit: the header's value
};
HeadKey check_head(const config::LlmPrefixConfig& cfg, const http::RequestHead& head) noexcept;

// What the body gave.
struct BodyKeyResult {
  BodyKeySource source = BodyKeySource::kNoBody;
  uint64_t hash = 0;        // the key's hash (not a fallback): the conversation, or the explicit key's
  bool grouped = false;     // the key belongs to a tenant: `tenant` picks its set
  uint64_t tenant = 0;
  uint64_t offset = 0;      // body bytes read when the decision was taken
};

class BodyKey final : public BodySource {
 public:
  // A pooled buffer keeps at most this much capacity between requests.
  static constexpr size_t kMaxPooledHold = 256 * 1024;
  // Bytes fed to the scanner (and held) per step: the anchors are known within this many
  // bytes of where they end.
  static constexpr size_t kFeedStep = 4096;

  BodyKey() = default;
  BodyKey(const BodyKey&) = delete;
  BodyKey& operator=(const BodyKey&) = delete;
  ~BodyKey() { end(); }

  // Starts reading `source` with the pool's scanner options (Pool::llm_options), holding at
  // most `max_buffer` bytes, and at most `budget` bytes with every other request together.
  void begin(const LlmKeyOptions& opts, uint64_t max_buffer, uint64_t budget,
             BodySource* source) noexcept;
  enum class Step : uint8_t {
    kWait,     // the source calls the exchange's on_body_available() when more arrives
    kDecided,  // result() holds the key; route, then read the body through this object
    kFailed,   // the body broke its framing or a limit: failure() says how
  };
  // Reads what the source offers now into the hold buffer and the scanner.
  Step pump() noexcept;
  const BodyKeyResult& result() const noexcept { return result_; }
  // The scanner's view (form, anchors, offsets), for the explain API.
  const LlmKeys& scanner_keys() const noexcept { return scanner_.keys(); }
  // The key's text for the access log and the hot-key detector: hashes only, never prompt text.
  std::string_view key_text() const noexcept { return {key_text_.data(), key_len_}; }
  std::string_view tenant_text() const noexcept { return {tenant_text_.data(), tenant_len_}; }
  // Gives back the buffer and the budget (the exchange ended). Idempotent.
  void end() noexcept;
  size_t held() const noexcept { return held_.size() - sent_; }

  // BodySource: the held bytes, then the client's source.
  BodyView peek() noexcept override;
  void consume(size_t n) noexcept override;
  bool want_more() noexcept override;
  BodyFailure failure() const noexcept override { return source_->failure(); }
  int body_splice_fd(uint64_t min, uint64_t* bytes) noexcept override;
  void body_spliced(uint64_t n) noexcept override { source_->body_spliced(n); }
  SpliceChunk body_splice_next_chunk(uint64_t min) noexcept override;
  void body_splice_wait(SpliceWait on) noexcept override { source_->body_splice_wait(on); }

 private:
  void decide(BodyKeySource cap) noexcept;
  void set_texts() noexcept;
  void release_hold() noexcept;

  BodySource* source_ = nullptr;
  uint64_t max_buffer_ = 0;
  uint64_t budget_ = 0;
  bool blocks_mode_ = false;  // the conversation anchor is counted in blocks
  LlmKeyScanner scanner_;
  std::string held_;        // the body bytes read for the decision, replayed first
  size_t sent_ = 0;         // of held_, consumed by the exchange
  uint64_t reserved_ = 0;   // bytes of BodyBudget this request holds
  bool reading_ = false;    // between begin() and the decision
  BodyKeyResult result_;
  std::array<char, 40> key_text_{};
  std::array<char, 24> tenant_text_{};
  uint8_t key_len_ = 0, tenant_len_ = 0;
};

}  // namespace rondel::proxy
