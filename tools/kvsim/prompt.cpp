// Prompt rendering and the chained block hash (see prompt.h).
#include "prompt.h"

#include <xxhash.h>

namespace kvsim {

std::string render_chat(const std::vector<ChatMessage>& messages) {
  size_t size = 16;
  for (const auto& m : messages) size += m.role.size() + m.content.size() + 8;
  std::string text;
  text.reserve(size);
  for (const auto& m : messages) {
    text += "<|";
    text += m.role;
    text += "|>\n";
    text += m.content;
    text += '\n';
  }
  text += "<|assistant|>\n";
  return text;
}

PromptBlocks hash_prompt(std::string_view text, uint64_t seed) {
  PromptBlocks out;
  out.tokens = static_cast<uint32_t>((text.size() + kBytesPerToken - 1) / kBytesPerToken);
  size_t full = text.size() / kBytesPerBlock;
  out.chain.reserve(full);
  uint64_t parent = seed;
  for (size_t i = 0; i < full; ++i) {
    parent = XXH3_64bits_withSeed(text.data() + i * kBytesPerBlock, kBytesPerBlock, parent);
    out.chain.push_back(parent);
  }
  return out;
}

}  // namespace kvsim
