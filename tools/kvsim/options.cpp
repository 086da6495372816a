// kvsim's command line: one row per flag (see options.h).
#include "options.h"

#include <charconv>
#include <cstdlib>
#include <variant>
#include <vector>

namespace kvsim {
namespace {

using Field = std::variant<uint32_t Options::*, uint64_t Options::*, double Options::*,
                           std::string Options::*, bool Options::*, uint32_t ServerConfig::*,
                           double TimeModel::*, uint32_t OracleParams::*, double OracleParams::*>;

struct Flag {
  std::string_view name;
  Field field;
  std::string_view help;
};

const std::vector<Flag>& flags() {
  static const std::vector<Flag> table = {
      {"--servers", &Options::servers, "simulated servers, one port each (8: llm-d's benchmark ran 8 pods)"},
      {"--port", &Options::port,
       "first server port; server i listens on PORT + i (0: each on an ephemeral port);\n"
       "      each prints \"listening HOST:PORT\" on stdout, then \"ready\""},
      {"--oracle-port", &Options::oracle_port, "port of the oracle router (0: none, or see --oracle)"},
      {"--oracle", &Options::oracle, "an oracle on an ephemeral port: prints \"oracle HOST:PORT\""},
      {"--host", &Options::host, "address to listen on (127.0.0.1)"},
      {"--kv-blocks", &ServerConfig::kv_blocks,
       "KV-cache blocks of 16 tokens per server (18600: Qwen3-32B keeps 256 KiB per token\n"
       "      (64 layers x 8 KV heads x 128 x K,V x 2 bytes); two 80 GB H100s at vLLM's 0.9\n"
       "      memory use minus 65.5 GB of weights leave 78 GB, about 297,000 tokens)"},
      {"--max-num-seqs", &ServerConfig::max_num_seqs, "running sequences per server (256: vLLM's default)"},
      {"--p0", &TimeModel::p0, "prefill seconds per request (0.05: assumed, no published figure)"},
      {"--p1", &TimeModel::p1,
       "prefill seconds per uncached prompt token (0.00037: llm-d at Red Hat Summit 2026, a\n"
       "      10,000-token prompt on Qwen3-32B, 4.3 s cold and 0.6 s warm)"},
      {"--decode", &TimeModel::d, "decode seconds per output token (0.03: assumed, no published figure)"},
      {"--speedup", &Options::speedup, "model seconds per real second (1); every time is divided by it"},
      {"--seed", &Options::seed, "seed of the block hash and of the generated text"},
      {"--oracle-factor", &OracleParams::factor_percent,
       "oracle's load bound, percent of the mean load (125, KubeAI's PrefixHash; 0: none)"},
      {"--oracle-slack", &OracleParams::slack, "requests a server may always hold above the bound (8)"},
      {"--oracle-work-weight", &OracleParams::work_weight,
       "among the servers under the bound the oracle takes the least prefill backlog +\n"
       "      WEIGHT x the prefill time this request adds there (3; see docs/benchmarks.md)"},
      {"--orca", &Options::orca,
       "send endpoint-load-metrics: TEXT named_metrics.kv_cache_utilization=U,\n"
       "      named_metrics.num_requests_waiting=W on every response"},
      {"--chunk-ms", &Options::chunk_ms, "real milliseconds between SSE chunks of a stream (50)"},
      {"--default-max-tokens", &Options::default_max_tokens, "output tokens when a request sets no max_tokens (16)"},
      {"--max-body", &Options::max_body, "largest request body in bytes (64 MiB; 413 beyond)"},
      {"--help", &Options::help, "this text"},
  };
  return table;
}

template <typename T>
bool parse_number(std::string_view text, T& out) {
  if constexpr (std::is_same_v<T, double>) {
    std::string s(text);
    char* end = nullptr;
    out = std::strtod(s.c_str(), &end);
    return !s.empty() && end == s.c_str() + s.size() && out >= 0;
  } else {
    int base = text.starts_with("0x") ? 16 : 10;
    if (base == 16) text.remove_prefix(2);
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), out, base);
    return ec == std::errc() && ptr == text.data() + text.size();
  }
}

}  // namespace

std::optional<Options> parse_options(int argc, char** argv, std::string& error) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    const Flag* flag = nullptr;
    for (const auto& f : flags())
      if (f.name == arg) flag = &f;
    if (!flag) {
      error = "unknown option " + std::string(arg);
      return std::nullopt;
    }
    if (std::holds_alternative<bool Options::*>(flag->field)) {
      o.*std::get<bool Options::*>(flag->field) = true;
      continue;
    }
    if (i + 1 >= argc) {
      error = std::string(arg) + " needs a value";
      return std::nullopt;
    }
    std::string_view value = argv[++i];
    bool ok = std::visit(
        [&](auto member) -> bool {
          using M = decltype(member);
          if constexpr (std::is_same_v<M, std::string Options::*>) {
            o.*member = std::string(value);
            return true;
          } else if constexpr (std::is_same_v<M, bool Options::*>) {
            return true;
          } else if constexpr (std::is_same_v<M, uint32_t ServerConfig::*>) {
            return parse_number(value, o.server.*member);
          } else if constexpr (std::is_same_v<M, double TimeModel::*>) {
            return parse_number(value, o.server.time.*member);
          } else if constexpr (std::is_same_v<M, uint32_t OracleParams::*> ||
                               std::is_same_v<M, double OracleParams::*>) {
            return parse_number(value, o.oracle_params.*member);
          } else {
            return parse_number(value, o.*member);
          }
        },
        flag->field);
    if (!ok) {
      error = std::string(arg) + ": not a valid number: " + std::string(value);
      return std::nullopt;
    }
  }
  if (o.help) return o;
  if (o.port + o.servers > 65536) error = "--port: give a port P with P + servers <= 65536";
  else if (o.servers == 0) error = "--servers must be at least 1";
  else if (o.speedup <= 0) error = "--speedup must be above 0";
  else if (o.server.kv_blocks == 0 || o.server.max_num_seqs == 0) error = "--kv-blocks and --max-num-seqs must be at least 1";
  else if (o.chunk_ms == 0) error = "--chunk-ms must be at least 1";
  if (!error.empty()) return std::nullopt;
  return o;
}

std::string usage() {
  std::string text =
      "usage: kvsim [--port P] [options]\n"
      "Simulated OpenAI-compatible inference servers with a KV-cache model, one port each\n"
      "(POST /v1/chat/completions and /v1/completions, streaming or not; GET /stats).\n"
      "Prompt: chat rendered with role markers, 4 bytes a token (OpenAI's rule of thumb),\n"
      "blocks of 16 tokens (vLLM's default --block-size), chained XXH3 hashes.\n"
      "Time: prefill p0 + p1 x uncached tokens, one prefill at a time; first token after d,\n"
      "last after d x output tokens; all divided by --speedup.\n\n";
  for (const auto& f : flags()) {
    text += "  ";
    text += f.name;
    text += "\n      ";
    text += f.help;
    text += '\n';
  }
  return text;
}

}  // namespace kvsim
