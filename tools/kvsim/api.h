// The OpenAI-compatible API of kvsim: request bodies in (Boost.JSON), answers and SSE chunks out.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kvsim {

struct ApiRequest {
  bool chat = true;            // /v1/chat/completions (else /v1/completions)
  bool stream = false;
  std::string model = "kvsim";
  uint32_t max_tokens = 0;     // 0: not given
  std::string prompt_text;     // rendered chat, or the completion prompt
};

// Parses a request body; on error returns nullopt and sets `error` (answered with 400).
// Chat content may be a string or an array of parts (text parts by their text, other parts by
// their JSON text); `prompt` may be a string or an array of strings (joined).
std::optional<ApiRequest> parse_api_request(std::string_view body, bool chat, std::string& error);

struct Usage {
  uint32_t prompt_tokens = 0;
  uint32_t completion_tokens = 0;
  uint32_t cached_tokens = 0;
};

// The generated text of tokens [from, to) of request `id`: 4 bytes a token, deterministic.
std::string output_text(uint64_t seed, uint64_t id, uint32_t from, uint32_t to);

// A whole non-streaming answer (JSON).
std::string answer_json(const ApiRequest& req, uint64_t id, std::string_view text, const Usage& usage);
// One SSE event "data: {...}\n\n" with `text` (a content delta); finish: the last one, with
// finish_reason "length" and the usage.
std::string chunk_event(const ApiRequest& req, uint64_t id, std::string_view text, const Usage* finish);
// {"error": {"message": ..., "type": ...}}
std::string error_json(std::string_view message, std::string_view type);

}  // namespace kvsim
