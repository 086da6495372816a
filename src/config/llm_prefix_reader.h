// The reader of a pool's `llm_prefix` section (hash_key: llm_prefix, docs/configuration.md):
// reports every error through the NodeReader, at FILE:LINE:COL.
#pragma once

#include "node_reader.h"
#include "rondel/config/config.h"

namespace rondel::config {

// Fills `out` from the mapping `f`: conversation (first_user, system or blocks), blocks
// (1..2^20), explicit (a list of header:NAME or body:NAME, NAME a token; body fields are
// top-level string fields of the JSON body), max_buffer (a size >= 1 KiB).
void read_llm_prefix(NodeReader& r, const Field& f, LlmPrefixConfig& out);

}  // namespace rondel::config
