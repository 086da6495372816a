// Prompt: how kvsim turns a request's text into tokens and a chain of block hashes (no I/O).
//
// The model every simulated server shares: chat messages are rendered with role markers, 4 bytes
// count as one token, tokens are cut into blocks of kTokensPerBlock, and every full block is
// hashed with kvsim's own hash (XXH3 seeded by the previous block's hash, the first by the run's
// seed), so a block's hash covers its whole prefix and two prompts share exactly the hashes of
// the full blocks they share. It deliberately shares no code with rondel's hashing: kvsim grades
// rondel and must not share its mistakes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kvsim {

inline constexpr uint32_t kBytesPerToken = 4;     // OpenAI: "one token is about 4 characters"
inline constexpr uint32_t kTokensPerBlock = 16;   // vLLM's default --block-size
inline constexpr uint32_t kBytesPerBlock = kBytesPerToken * kTokensPerBlock;

struct ChatMessage {
  std::string role;
  std::string content;
};

// Renders chat messages as one text: "<|ROLE|>\n" CONTENT "\n" for each message, then the
// generation prompt "<|assistant|>\n". Rendering is append-only: the text of a conversation is a
// byte prefix of the text of the same conversation with more messages appended (an assistant
// message renders exactly as the generation prompt followed by its content).
std::string render_chat(const std::vector<ChatMessage>& messages);

struct PromptBlocks {
  uint32_t tokens = 0;           // ceil(bytes / kBytesPerToken)
  std::vector<uint64_t> chain;   // one hash per full block, each covering its parent
};

// Tokens and block chain of `text` under `seed`. Cost: one XXH3 pass over the text.
PromptBlocks hash_prompt(std::string_view text, uint64_t seed);

// Blocks a request holds while it runs: its prompt and its output tokens, rounded up to blocks.
inline uint32_t blocks_for(uint32_t prompt_tokens, uint32_t output_tokens) {
  return (prompt_tokens + output_tokens + kTokensPerBlock - 1) / kTokensPerBlock;
}

}  // namespace kvsim
