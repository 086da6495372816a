// The streaming prompt-key scanner of `hash_key: llm_prefix`: reads an LLM request body (OpenAI
// chat, Anthropic messages, OpenAI Responses, raw completions `prompt`) as it arrives and derives
// its tenant and conversation anchors from one canonical stream, in bounded memory.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "rondel/config/config.h"

namespace rondel::proxy {

// Where the conversation anchor sits: the config's enum (one name table, config.h).
using LlmAnchor = config::LlmAnchor;

struct LlmKeyOptions {
  LlmAnchor conversation = LlmAnchor::kFirstUser;
  uint32_t conversation_blocks = 16;  // kBlocks, and for a raw `prompt` (any anchor setting)
  // Body fields whose string value is an explicit key, in priority order (e.g. "prompt_cache_key",
  // "user"); only top-level string fields. Empty: none (the scanner can then stop at the anchors).
  std::vector<std::string> explicit_fields;  // set once per config, not per request
};

enum class LlmScan : uint8_t {
  kMore,     // feed more bytes
  kDone,     // everything the decision needs is known: stop feeding (the rest is not read)
  kInvalid,  // not JSON, or not an object at the top, or nesting too deep: route by missing_key
};

struct LlmKeys {
  bool explicit_key = false;   // an explicit field was found: explicit_value() holds its value
  uint8_t explicit_index = 0;  // which of explicit_fields
  bool has_tenant = false;     // a system part exists (system messages, `system`, `instructions`)
  uint64_t tenant = 0;         // the tenant anchor (chain state at the end of the system part)
  bool has_conversation = false;
  uint64_t conversation = 0;   // the conversation anchor
  uint64_t anchor_offset = 0;  // body bytes fed when the last needed anchor became known
  uint32_t blocks = 0;         // 64-byte canonical blocks hashed so far
  // What the body is: chat `messages`, Anthropic (`system` + `messages`), Responses
  // (`instructions` + `input`), raw `prompt`, or none found.
  enum class Form : uint8_t { kNone, kChat, kAnthropic, kResponses, kPrompt } form = Form::kNone;
};

// One request body's scanner (Boost.JSON's incremental basic_parser, no DOM; xxHash XXH3).
//
// Canonical stream. Strings are hashed decoded (so `"a\u0062"` == `"ab"`), independent of JSON
// whitespace and key order. A record is one message: its content parts in order (a string
// content is one text part; a text part contributes its text; an image, audio or file part a tag
// byte 0xFC and the 8-byte XXH3 digest of its url/data/file_data/file_id string, hashed
// streaming), parts separated by 0xFD, then 0xFF, the role, 0xFE. Roles `system` and
// `developer` are both spelled "system"; a message without a role has role "". Bytes 0xFC-0xFF
// never occur in the UTF-8 text Boost.JSON accepts, so records cannot be confused. Tool calls,
// names and every other field are not part of the stream.
//
// Two chains of 64-byte blocks: block i's hash is XXH3_64bits_withSeed(block, 64, hash of block
// i-1), the first seeded with a constant. The anchor at a position is the chain state there with
// the partial last block folded in: XXH3_64bits_withSeed(partial, length, state + length). So a
// longer conversation yields exactly the anchors of its shorter prefix.
//  * S chain (the system part): the leading system/developer messages of `messages`/`input`, and
//    a top-level `system` (string or array of text blocks) or `instructions` (string), each a
//    record with role "system" (so a chat body with a system message and the Anthropic body with
//    the same text as `system` have the same anchors). Tenant = the S chain at the end of its
//    last record. A body with both a top-level `system` and system messages: records in body
//    order, and the one after kDone is not read.
//  * M chain: the records from the first non-system message on (`input` as a plain string is
//    one user message), or a raw `prompt` (string: its text; an array: strings as parts, token
//    ids as 8 little-endian bytes each, nested arrays as parts).
// Conversation anchor: kFirstUser: core::mix64(tenant or 0, M at the end of the first message
// with role user); kSystem: the tenant itself; kBlocks: mix64(tenant or 0, M after
// conversation_blocks blocks, or at the end of the conversation if shorter). A raw prompt has
// no tenant, and its conversation anchor is the M chain after conversation_blocks blocks or at
// the prompt's end, whatever the anchor setting. has_conversation is false until that position is
// reached (a body with no user message has none under kFirstUser).
//
// kDone as soon as the conversation anchor, the tenant and (when explicit_fields is non-empty)
// the explicit key are settled: the tenant is settled when the conversation's system part is
// over and a system part was seen; when none was, a top-level `system`/`instructions` may still
// follow, so kDone waits for it or for the top-level object's end. The explicit key is settled
// by the first-priority field, or the object's end (a later, higher-priority field replaces an
// earlier one). Parsing stops at that event, so keys (but not anchor_offset) are the same for
// any split of the body; anchor_offset counts whole feed() calls.
//
// Bounded memory: no allocation per request once the parser's stack has grown (reset keeps it),
// depth at most kMaxDepth (deeper is kInvalid), explicit values truncated at 256 bytes, field
// names compared on their first 64 bytes. Body bytes are never copied except a chain's partial
// block (< 64 bytes), role names and explicit values.
class LlmKeyScanner {
 public:
  static constexpr size_t kMaxDepth = 32;
  static constexpr size_t kMaxExplicit = 256;

  LlmKeyScanner();
  ~LlmKeyScanner();
  LlmKeyScanner(const LlmKeyScanner&) = delete;
  LlmKeyScanner& operator=(const LlmKeyScanner&) = delete;

  // Starts a new body. `o` must outlive the scan (explicit_fields is read, not copied). Keeps
  // the parser's buffers: no allocation in steady state.
  void reset(const LlmKeyOptions& o) noexcept;
  // Feeds the next bytes of the body (any split, 1 byte at a time included); `end` marks the
  // body's last bytes. After kDone or kInvalid, further calls return the same and read nothing.
  // A body that ends (end = true) before its top-level object closes is kInvalid unless already
  // kDone. O(size); the loop thread that owns the scanner.
  LlmScan feed(std::string_view bytes, bool end) noexcept;
  // What is known now (also after kMore at a cap: the caller routes on what is known). Before
  // kDone, has_tenant says whether a system part was seen so far, and a conversation anchor is
  // mixed with that tenant (a top-level `system` after `messages` would still change both).
  const LlmKeys& keys() const noexcept;
  // The explicit key's bytes (<= kMaxExplicit, truncated); valid until the next reset or feed.
  std::string_view explicit_value() const noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace rondel::proxy
