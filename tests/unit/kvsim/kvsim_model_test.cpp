// kvsim's model without sockets: the block chain, the KV cache, the scheduler and time model,
// and the oracle's pick.
#include <doctest/doctest.h>

#include <string>

#include "kv_cache.h"
#include "oracle.h"
#include "prompt.h"
#include "server_model.h"

using namespace kvsim;

namespace {

constexpr uint64_t kSeed = 42;

std::string text_of(size_t bytes, char fill) { return std::string(bytes, fill); }

Job job_of(uint64_t id, const std::string& text, uint32_t output_tokens) {
  PromptBlocks p = hash_prompt(text, kSeed);
  return Job{id, p.chain, p.tokens, output_tokens};
}

ServerConfig config_of(uint32_t kv_blocks, uint32_t max_num_seqs) {
  return ServerConfig{kv_blocks, max_num_seqs, TimeModel{0.5, 0.001, 0.02}};
}

}  // namespace

TEST_CASE("tokens and blocks: 4 bytes a token, 16 tokens a full block, chained") {
  PromptBlocks p = hash_prompt(text_of(1000, 'a'), kSeed);
  CHECK(p.tokens == 250);
  CHECK(p.chain.size() == 15);  // 1000 / 64
  // Two equal blocks at different places hash differently: each covers its parent.
  CHECK(p.chain[0] != p.chain[1]);
  // Another seed, other hashes.
  CHECK(hash_prompt(text_of(64, 'a'), 7).chain[0] != p.chain[0]);
}

TEST_CASE("rendering is append-only: a longer conversation starts with the shorter one") {
  std::vector<ChatMessage> turn1{{"system", "be brief"}, {"user", "hi"}};
  std::vector<ChatMessage> turn2 = turn1;
  turn2.push_back({"assistant", "hello"});
  turn2.push_back({"user", "more"});
  std::string a = render_chat(turn1);
  std::string b = render_chat(turn2);
  CHECK(a == "<|system|>\nbe brief\n<|user|>\nhi\n<|assistant|>\n");
  CHECK(b.starts_with(a));
}

TEST_CASE("a repeated prompt hits every full block") {
  ServerModel s(config_of(1000, 8));
  std::vector<Started> out;
  std::string text = text_of(64 * 20 + 10, 'x');  // 20 full blocks and a partial one
  REQUIRE(s.submit(job_of(1, text, 10), 0, out));
  REQUIRE(out.size() == 1);
  CHECK(out[0].cached_tokens == 0);
  s.finish(1, out[0].finish_at, out);
  out.clear();
  REQUIRE(s.submit(job_of(2, text, 10), 10, out));
  REQUIRE(out.size() == 1);
  CHECK(out[0].cached_tokens == 20 * kTokensPerBlock);
  CHECK(s.totals().cached_tokens == 320);
  CHECK(s.totals().prompt_tokens == 2 * 323);
}

TEST_CASE("a prompt sharing a prefix hits exactly the shared full blocks") {
  ServerModel s(config_of(1000, 8));
  std::vector<Started> out;
  std::string shared = text_of(64 * 7 + 30, 's');  // 7 full blocks, then 30 shared bytes
  REQUIRE(s.submit(job_of(1, shared + text_of(500, 'a'), 5), 0, out));
  REQUIRE(s.submit(job_of(2, shared + text_of(500, 'b'), 5), 0, out));
  REQUIRE(out.size() == 2);
  CHECK(out[0].cached_tokens == 0);
  // Block 8 holds the 30 shared bytes and 34 different ones: a miss.
  CHECK(out[1].cached_tokens == 7 * kTokensPerBlock);
}

TEST_CASE("LRU evicts the least recently used unpinned block, the tail of a prompt first") {
  KvCache c(4);
  uint64_t a[] = {1, 2};
  uint64_t b[] = {3};
  uint64_t d[] = {4};
  REQUIRE(c.acquire(a, 0));
  REQUIRE(c.acquire(b, 0));
  c.release(a, 0);  // LRU order now: 2, 1 (the tail first)
  c.release(b, 0);  // 2, 1, 3
  uint64_t e[] = {5, 6};
  REQUIRE(c.acquire(d, 0));  // a free slot: nothing evicted
  CHECK(c.evictions() == 0);
  REQUIRE(c.acquire(e, 0));  // two slots needed: 2 then 1 go
  CHECK(c.evictions() == 2);
  uint64_t first[] = {1};
  uint64_t second[] = {3};
  CHECK(c.match(first) == 0);
  CHECK(c.match(second) == 1);
  SUBCASE("pinned blocks are never evicted") {
    // 4 (pinned), 5 and 6 (pinned), 3 unpinned: only one slot can be freed.
    uint64_t big[] = {7, 8};
    CHECK_FALSE(c.acquire(big, 0));
    CHECK(c.match(second) == 1);  // a refused acquire changes nothing
    uint64_t one[] = {7};
    CHECK(c.acquire(one, 0));
    CHECK(c.match(second) == 0);
    CHECK(c.in_use() == 4);
  }
}

TEST_CASE("queueing starts at max_num_seqs, and the queue is served in order") {
  ServerModel s(config_of(10000, 3));
  std::vector<Started> out;
  for (uint64_t id = 1; id <= 5; ++id) REQUIRE(s.submit(job_of(id, text_of(100, char('a' + id)), 4), 0, out));
  CHECK(out.size() == 3);
  CHECK(s.running() == 3);
  CHECK(s.waiting() == 2);
  double t = out[0].finish_at;
  out.clear();
  s.finish(1, t, out);
  REQUIRE(out.size() == 1);
  CHECK(out[0].id == 4);
  CHECK(out[0].admitted_at == t);
  CHECK(s.waiting() == 1);
}

TEST_CASE("a request waits while its blocks do not fit beside the running ones") {
  ServerModel s(config_of(10, 8));
  std::vector<Started> out;
  REQUIRE(s.submit(job_of(1, text_of(64 * 6, 'a'), 16), 0, out));  // 7 blocks
  REQUIRE(s.submit(job_of(2, text_of(64 * 6, 'b'), 16), 0, out));  // 7 more: waits
  CHECK(out.size() == 1);
  CHECK(s.waiting() == 1);
  CHECK_FALSE(s.submit(job_of(3, text_of(64 * 20, 'c'), 0), 0, out));  // never fits
  out.clear();
  s.finish(1, 5, out);
  REQUIRE(out.size() == 1);
  CHECK(out[0].id == 2);
}

TEST_CASE("time model: prefill p0 + p1 x uncached tokens, one at a time; decode d x output") {
  ServerModel s(config_of(1000, 8));  // p0 0.5 s, p1 1 ms/token, d 20 ms/token
  std::vector<Started> out;
  std::string text = text_of(64 * 10, 'q');  // 160 tokens, 10 blocks
  REQUIRE(s.submit(job_of(1, text, 50), 2.0, out));
  REQUIRE(out.size() == 1);
  CHECK(out[0].first_token_at == doctest::Approx(2.0 + 0.5 + 0.160 + 0.02));
  CHECK(out[0].finish_at == doctest::Approx(2.0 + 0.5 + 0.160 + 50 * 0.02));
  // A second prompt at the same time waits for the first prefill; its cached prefix is free.
  REQUIRE(s.submit(job_of(2, text + text_of(64 * 5, 'r'), 10), 2.0, out));
  REQUIRE(out.size() == 2);
  CHECK(out[1].cached_tokens == 160);
  double first_prefill_end = 2.0 + 0.5 + 0.160;
  CHECK(out[1].first_token_at == doctest::Approx(first_prefill_end + 0.5 + 0.080 + 0.02));
  CHECK(out[1].finish_at == doctest::Approx(first_prefill_end + 0.5 + 0.080 + 10 * 0.02));
}

TEST_CASE("KV use is reported as pinned blocks over capacity, with its time-weighted mean") {
  ServerModel s(config_of(100, 8));
  std::vector<Started> out;
  REQUIRE(s.submit(job_of(1, text_of(64 * 40, 'k'), 160), 0, out));  // 40 + 10 blocks
  CHECK(s.totals().kv_use_max == doctest::Approx(0.5));
  s.finish(1, 10, out);
  CHECK(s.kv_use_mean(20) == doctest::Approx(0.25));  // half full for 10 s of 20
}

TEST_CASE("oracle: the longest cached prefix wins among servers under the load bound") {
  std::vector<ServerModel> servers;
  for (int i = 0; i < 4; ++i) servers.emplace_back(config_of(1000, 64));
  std::vector<Started> out;
  std::string context = text_of(64 * 30, 'c');
  REQUIRE(servers[2].submit(job_of(1, context + "one", 10), 0, out));
  for (size_t i = 0; i < 4; ++i)  // every server as loaded as server 2
    if (i != 2) REQUIRE(servers[i].submit(job_of(100 + i, text_of(10, char('a' + i)), 1), 0, out));
  PromptBlocks next = hash_prompt(context + "two", kSeed);
  OracleChoice c = oracle_pick(servers, next.chain, next.tokens, 10, OracleParams{125, 0, 3});
  CHECK(c.server == 2);
  CHECK(c.matched_blocks == 30);
  CHECK_FALSE(c.spilled);
  // Load server 2 past the bound (ceil(1.25 x (total + 1) / 4)): the pick moves and says so;
  // with a slack of 8 it stays.
  for (uint64_t id = 2; id <= 5; ++id)
    REQUIRE(servers[2].submit(job_of(id, context + std::to_string(id), 10), 0, out));
  c = oracle_pick(servers, next.chain, next.tokens, 10, OracleParams{125, 0, 3});
  CHECK(c.server != 2);
  CHECK(c.spilled);
  CHECK(oracle_pick(servers, next.chain, next.tokens, 10, OracleParams{0, 0, 3}).server == 2);  // no bound
  CHECK(oracle_pick(servers, next.chain, next.tokens, 10, OracleParams{125, 8, 3}).server == 2);
}

TEST_CASE("oracle: a prefix no server holds goes to the least loaded, then the emptiest cache") {
  std::vector<ServerModel> servers;
  for (int i = 0; i < 3; ++i) servers.emplace_back(config_of(1000, 64));
  std::vector<Started> out;
  REQUIRE(servers[0].submit(job_of(1, text_of(64 * 10, 'a'), 1), 0, out));
  servers[0].finish(1, out[0].finish_at, out);
  REQUIRE(servers[1].submit(job_of(2, text_of(64 * 5, 'b'), 1), 0, out));
  servers[1].finish(2, out[1].finish_at, out);
  // Idle servers 0 (10 cached blocks), 1 (5) and 2 (none): a new prompt goes to 2.
  PromptBlocks fresh = hash_prompt(text_of(64 * 4, 'z'), kSeed);
  CHECK(oracle_pick(servers, fresh.chain, fresh.tokens, 10, OracleParams{125, 8, 3}).server == 2);
  REQUIRE(servers[2].submit(job_of(3, text_of(64 * 4, 'z'), 100), 10, out));
  // Server 2 now busy (load 1): the next new prompt goes to the idle server with fewer blocks.
  PromptBlocks other = hash_prompt(text_of(64 * 4, 'y'), kSeed);
  CHECK(oracle_pick(servers, other.chain, other.tokens, 10, OracleParams{125, 8, 3}).server == 1);
}

TEST_CASE("oracle: prefill backlog against the weighted work a cached prefix saves") {
  std::vector<ServerModel> servers;
  for (int i = 0; i < 2; ++i) servers.emplace_back(config_of(10000, 64));  // p1 1 ms a token
  std::vector<Started> out;
  std::string system = text_of(64 * 10, 's');  // 160 tokens shared by every request
  // Server 0 holds the shared prefix and three long prompts queued for prefill.
  for (uint64_t id = 1; id <= 3; ++id)
    REQUIRE(servers[0].submit(job_of(id, system + text_of(64 * 50, char('a' + id)), 10), 0, out));
  // 960 tokens each; the second and third find the shared 160 cached.
  CHECK(servers[0].prefill_backlog(0) == doctest::Approx(3 * 0.5 + 0.001 * (960 + 800 + 800)));
  PromptBlocks shortp = hash_prompt(system + text_of(64 * 2, 'q'), kSeed);  // 192 tokens
  // Server 0: 4.06 + 3 x 0.032; server 1: 0 + 3 x 0.192. The queue loses.
  OracleChoice c = oracle_pick(servers, shortp.chain, shortp.tokens, 0, OracleParams{125, 8, 3});
  CHECK(c.server == 1);
  CHECK(c.spilled);
  CHECK(c.expected_ttft == doctest::Approx(0.5 + 0.001 * 192));
  // With a weight of 1000 the saved work outweighs the queue: the longest prefix wins.
  CHECK(oracle_pick(servers, shortp.chain, shortp.tokens, 0, OracleParams{125, 8, 1000}).server == 0);
  // Once those prefills are done (the requests still decode), the prefix wins at weight 3 too.
  CHECK(servers[0].prefill_backlog(5) == 0);
  c = oracle_pick(servers, shortp.chain, shortp.tokens, 5, OracleParams{125, 8, 3});
  CHECK(c.server == 0);
  CHECK_FALSE(c.spilled);
  CHECK(c.expected_ttft == doctest::Approx(0.5 + 0.001 * 32));
}
