// The llm_prefix body scanner (proxy/llm_key.h): forms, a naive reference of the canonical
// stream, invariance to whitespace, key order, escapes and feed splits, the prefix property over
// generated conversations, explicit fields, refused bodies and where kDone stops.
#include "rondel/proxy/llm_key.h"

#include <doctest/doctest.h>

#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "new_count.h"
#include "rondel/core/hash.h"

namespace rondel::proxy {
namespace {

using Form = LlmKeys::Form;

struct Scan {
  LlmScan status = LlmScan::kMore;
  LlmKeys keys;
  std::string explicit_value;
};

// Scans `body` in pieces of `piece` bytes (the last piece marked end).
Scan scan(std::string_view body, const LlmKeyOptions& o = {}, size_t piece = size_t(-1)) {
  LlmKeyScanner s;
  s.reset(o);
  Scan r;
  size_t at = 0;
  do {
    const size_t n = std::min(piece, body.size() - at);
    r.status = s.feed(body.substr(at, n), at + n == body.size());
    at += n;
  } while (r.status == LlmScan::kMore && at < body.size());
  r.keys = s.keys();
  r.explicit_value = std::string(s.explicit_value());
  return r;
}

// Keys that must not depend on how the body was split (anchor_offset counts whole feeds).
void same_keys(const Scan& a, const Scan& b) {
  CHECK(a.status == b.status);
  CHECK(a.keys.has_tenant == b.keys.has_tenant);
  CHECK(a.keys.tenant == b.keys.tenant);
  CHECK(a.keys.has_conversation == b.keys.has_conversation);
  CHECK(a.keys.conversation == b.keys.conversation);
  CHECK(a.keys.explicit_key == b.keys.explicit_key);
  CHECK(a.keys.explicit_index == b.keys.explicit_index);
  CHECK(a.keys.blocks == b.keys.blocks);
  CHECK(a.keys.form == b.keys.form);
  CHECK(a.explicit_value == b.explicit_value);
}

std::string quote(std::string_view s) {
  std::string q = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      q += '\\';
      q += c;
    } else if (c == '\n') {
      q += "\\n";
    } else if (c == '\t') {
      q += "\\t";
    } else {
      q += c;
    }
  }
  return q + '"';
}

struct Msg {
  std::string role;
  std::string text;
  std::string image;  // non-empty: a second part, an image_url with this URL
};

std::string content_json(const Msg& m) {
  if (m.image.empty()) return quote(m.text);
  return R"([{"type":"text","text":)" + quote(m.text) +
         R"(},{"type":"image_url","image_url":{"url":)" + quote(m.image) + "}}]";
}

// A chat body; `role_first` puts role before content (SDKs sorting keys put it after).
std::string chat(const std::vector<Msg>& msgs, bool role_first = true, std::string extra = "") {
  std::string b = R"({"model":"m","messages":[)";
  for (size_t i = 0; i < msgs.size(); ++i) {
    if (i) b += ',';
    const std::string role = R"("role":)" + quote(msgs[i].role);
    const std::string content = R"("content":)" + content_json(msgs[i]);
    b += '{' + (role_first ? role + ',' + content : content + ',' + role) + '}';
  }
  return b + "]" + extra + R"(,"stream":true})";
}

// The naive reference: the chain over a canonical stream given as a string (llm_key.h).
uint64_t chain_anchor(std::string_view stream, size_t max_blocks = size_t(-1)) {
  uint64_t state = 0x6c6c6d5f70726566ull;
  size_t i = 0, b = 0;
  for (; b < max_blocks && i + 64 <= stream.size(); ++b, i += 64) {
    state = core::hash64(stream.substr(i, 64), state);
  }
  const std::string_view partial = b == max_blocks ? std::string_view() : stream.substr(i);
  return core::hash64(partial, state + partial.size());
}
std::string record(std::string_view content, std::string_view role) {
  return std::string(content) + "\xFF" + std::string(role) + "\xFE";
}

TEST_CASE("llm_key: the anchors are the naive reference's chains over the canonical stream") {
  const std::string sys(100, 's'), user = "hello there", asst(70, 'a');
  const std::string body = chat({{"system", sys}, {"user", user}, {"assistant", asst}});
  const std::string s_stream = record(sys, "system");
  const std::string m_first = record(user, "user");
  const uint64_t tenant = chain_anchor(s_stream);

  const Scan first_user = scan(body);
  REQUIRE(first_user.status == LlmScan::kDone);
  CHECK(first_user.keys.form == Form::kChat);
  CHECK(first_user.keys.has_tenant);
  CHECK(first_user.keys.tenant == tenant);
  CHECK(first_user.keys.has_conversation);
  CHECK(first_user.keys.conversation == core::mix64(tenant, chain_anchor(m_first)));

  LlmKeyOptions o;
  o.conversation = LlmAnchor::kSystem;
  CHECK(scan(body, o).keys.conversation == tenant);
  o.conversation = LlmAnchor::kBlocks;
  o.conversation_blocks = 1;  // the M stream is 17 + 81 bytes: one whole block
  const std::string m_all = m_first + record(asst, "assistant");
  CHECK(scan(body, o).keys.conversation == core::mix64(tenant, chain_anchor(m_all, 1)));
  o.conversation_blocks = 16;  // shorter than 16 blocks: its end
  CHECK(scan(body, o).keys.conversation == core::mix64(tenant, chain_anchor(m_all)));

  // Parts: a string content is one text part; parts are separated by 0xFD; media by its digest.
  const Scan parts = scan(chat({{"user", "look", "https://x/cat.png"}}));
  const uint64_t d = core::hash64("https://x/cat.png");
  std::string digest = "\xFC";
  for (int i = 0; i < 8; ++i) digest += static_cast<char>(d >> (8 * i));
  CHECK_FALSE(parts.keys.has_tenant);
  CHECK(parts.keys.conversation ==
        core::mix64(0, chain_anchor(record("look\xFD" + digest, "user"))));
}

TEST_CASE("llm_key: forms") {
  CHECK(scan(chat({{"user", "hi"}})).keys.form == Form::kChat);
  const Scan a = scan(R"({"system":"be brief","messages":[{"role":"user","content":"hi"}]})");
  CHECK(a.keys.form == Form::kAnthropic);
  CHECK(a.keys.has_tenant);
  const Scan r = scan(R"({"instructions":"be brief","input":"hi"})");
  CHECK(r.status == LlmScan::kDone);
  CHECK(r.keys.form == Form::kResponses);
  // Responses input as a string == one user message; instructions == a system message.
  CHECK(r.keys.tenant == a.keys.tenant);
  CHECK(r.keys.conversation == a.keys.conversation);
  const Scan items =
      scan(R"({"input":[{"role":"developer","content":"be brief"},)"
           R"({"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}]})");
  CHECK(items.keys.form == Form::kResponses);
  CHECK(items.keys.tenant == a.keys.tenant);
  CHECK(items.keys.conversation == a.keys.conversation);

  LlmKeyOptions o;
  o.conversation_blocks = 1;
  const Scan p = scan(R"({"model":"m","prompt":"once upon a time"})", o);
  CHECK(p.status == LlmScan::kDone);
  CHECK(p.keys.form == Form::kPrompt);
  CHECK_FALSE(p.keys.has_tenant);
  CHECK(p.keys.conversation == chain_anchor("once upon a time"));
  CHECK(scan(R"({"prompt":["once upon a time"]})", o).keys.conversation == p.keys.conversation);
  std::string tokens;
  for (uint64_t t : {1u, 2u, 70000u}) {
    for (int i = 0; i < 8; ++i) tokens += static_cast<char>(t >> (8 * i));
  }
  CHECK(scan(R"({"prompt":[1,2,70000]})", o).keys.conversation == chain_anchor(tokens));
  CHECK(scan(R"({"prompt":[[1,2,70000]]})", o).keys.conversation == chain_anchor(tokens));
  // A long prompt: the anchor after conversation_blocks blocks, whatever follows.
  const std::string long_text(200, 'x');
  const Scan lp = scan(R"({"prompt":")" + long_text + R"(","max_tokens":5})", o);
  CHECK(lp.keys.conversation == chain_anchor(long_text, 1));
  CHECK(scan(R"({"prompt":")" + long_text + "yz\"}", o).keys.conversation == lp.keys.conversation);

  const Scan none = scan(R"({"model":"m","temperature":0.5,"tools":[{"a":[1,{"b":null}]}]})");
  CHECK(none.status == LlmScan::kDone);
  CHECK(none.keys.form == Form::kNone);
  CHECK_FALSE(none.keys.has_tenant);
  CHECK_FALSE(none.keys.has_conversation);
  // No user message: no conversation anchor under kFirstUser, the tenant still.
  const Scan only_system = scan(chat({{"system", "rules"}, {"assistant", "hello"}}));
  CHECK(only_system.keys.has_tenant);
  CHECK_FALSE(only_system.keys.has_conversation);
}

TEST_CASE("llm_key: whitespace, key order and escapes do not change the keys") {
  const std::vector<Msg> msgs = {{"system", "You are \"helpful\"."}, {"user", "ab\ncd"}};
  const Scan base = scan(chat(msgs));
  REQUIRE(base.status == LlmScan::kDone);
  same_keys(base, scan(chat(msgs, false)));
  const std::string spaced =
      "{ \"stream\" : true ,\n \"messages\" : [ {\n\t\"content\" : \"You are \\\"helpful\\u0022.\" "
      ","
      " \"role\": \"system\" } , { \"role\" : \"u\\u0073er\", \"content\" : [ { \"text\" : "
      "\"a\\u0062\\ncd\", \"type\" : \"text\" } ] } ] , \"model\" : \"m\" }  ";
  same_keys(base, scan(spaced));
  // developer == system.
  same_keys(base, scan(chat({{"developer", msgs[0].text}, msgs[1]})));
  // Fields outside the stream do not matter; the text does.
  same_keys(base, scan(chat(msgs, true, R"(,"temperature":0.2,"tools":[{"x":"y"}])")));
  CHECK(scan(chat({msgs[0], {"user", "ab\ncD"}})).keys.conversation != base.keys.conversation);
  CHECK(scan(chat({{"system", "other"}, msgs[1]})).keys.tenant != base.keys.tenant);
}

TEST_CASE("llm_key: Anthropic system + messages == chat with a system message") {
  const std::vector<Msg> turns = {{"user", "What is 2+2?"}, {"assistant", "4"}, {"user", "x2?"}};
  std::vector<Msg> with_system = {{"system", "You are a calculator."}};
  with_system.insert(with_system.end(), turns.begin(), turns.end());
  for (LlmAnchor anchor : {LlmAnchor::kFirstUser, LlmAnchor::kSystem, LlmAnchor::kBlocks}) {
    LlmKeyOptions o;
    o.conversation = anchor;
    o.conversation_blocks = 1;
    const Scan c = scan(chat(with_system), o);
    std::string msgs = chat(turns);
    msgs.pop_back();
    const Scan before = scan(R"({"system":"You are a calculator.",)" + msgs.substr(1) + "}", o);
    const Scan after =
        scan(msgs + R"(,"system":[{"type":"text","text":"You are a calculator."}]})", o);
    CHECK(c.keys.form == Form::kChat);
    CHECK(before.keys.form == Form::kAnthropic);
    for (const Scan* s : {&before, &after}) {
      CHECK(s->keys.has_tenant);
      CHECK(s->keys.tenant == c.keys.tenant);
      CHECK(s->keys.has_conversation);
      CHECK(s->keys.conversation == c.keys.conversation);
    }
  }
}

TEST_CASE("llm_key: every split point of a body gives the same keys") {
  const std::string body =
      chat({{"system", "S\u00e9v\\\"e"},
            {"user", std::string(150, 'q') + "\t\"", "data:image/png;base64,AAAA"},
            {"assistant", "ok"},
            {"user", "more"}},
           false, R"(,"user":"u-1","n":[1,2.5e3,-4,true,null])");
  LlmKeyOptions o;
  o.explicit_fields = {"prompt_cache_key", "user"};
  for (int pass = 0; pass < 3; ++pass) {
    // With the explicit fields the scan reads to the end (only `user` is there); without, it
    // stops at the first user message or the second block.
    if (pass == 2) o.explicit_fields.clear();
    o.conversation = pass == 0 ? LlmAnchor::kFirstUser : LlmAnchor::kBlocks;
    o.conversation_blocks = 2;
    const Scan whole = scan(body, o);
    REQUIRE(whole.status == LlmScan::kDone);
    CHECK(whole.explicit_value == (pass < 2 ? "u-1" : ""));
    same_keys(whole, scan(body, o, 1));
    for (size_t i = 1; i < body.size(); ++i) {
      LlmKeyScanner s;
      s.reset(o);
      LlmScan st = s.feed(std::string_view(body).substr(0, i), false);
      if (st == LlmScan::kMore) st = s.feed(std::string_view(body).substr(i), true);
      Scan split{st, s.keys(), std::string(s.explicit_value())};
      same_keys(whole, split);
    }
  }
}

// A generated conversation: optional system messages, then turns of random roles, lengths and
// parts; the first non-system message is a user message.
std::vector<Msg> conversation(std::mt19937_64& rng, size_t turns) {
  std::vector<Msg> msgs;
  const size_t systems = rng() % 3;
  for (size_t i = 0; i < systems; ++i) msgs.push_back({"system", std::string(rng() % 90, 's')});
  const char* roles[] = {"user", "assistant", "tool", "user"};
  for (size_t i = 0; i < turns; ++i) {
    Msg m{i == 0 ? "user" : roles[rng() % 4], "", ""};
    const size_t len = rng() % 300;
    for (size_t k = 0; k < len; ++k) m.text += static_cast<char>('a' + rng() % 26);
    if (rng() % 4 == 0) m.image = "https://img/" + std::to_string(rng());
    msgs.push_back(m);
  }
  return msgs;
}

TEST_CASE("llm_key: a longer conversation keeps the anchors of its prefix") {
  std::mt19937_64 rng(35);
  for (int round = 0; round < 200; ++round) {
    const std::vector<Msg> longer = conversation(rng, 2 + rng() % 6);
    size_t keep = std::max<size_t>(1, longer.size() - 1 - rng() % 2);
    while (longer[keep - 1].role == "system") ++keep;  // the prefix has its first user message
    const std::vector<Msg> prefix(longer.begin(), longer.begin() + keep);
    const bool role_first = rng() % 2;
    for (LlmAnchor anchor : {LlmAnchor::kFirstUser, LlmAnchor::kSystem, LlmAnchor::kBlocks}) {
      LlmKeyOptions o;
      o.conversation = anchor;
      o.conversation_blocks = 1;
      const Scan a = scan(chat(prefix, role_first), o, 1 + rng() % 100);
      const Scan b = scan(chat(longer, !role_first), o, 1 + rng() % 100);
      REQUIRE(a.status == LlmScan::kDone);
      REQUIRE(b.status == LlmScan::kDone);
      CHECK(a.keys.has_tenant == b.keys.has_tenant);
      CHECK(a.keys.tenant == b.keys.tenant);
      CHECK(a.keys.has_conversation == b.keys.has_conversation);
      // kBlocks: the same only once the prefix reached its block (the next test).
      if (anchor != LlmAnchor::kBlocks) CHECK(a.keys.conversation == b.keys.conversation);
    }
  }
  // Different first user messages under one system prompt: one tenant, two conversations.
  const Scan x = scan(chat({{"system", "shared"}, {"user", "question one"}}));
  const Scan y = scan(chat({{"system", "shared"}, {"user", "question two"}}));
  CHECK(x.keys.tenant == y.keys.tenant);
  CHECK(x.keys.conversation != y.keys.conversation);
}

TEST_CASE("llm_key: kBlocks anchors of a longer conversation match once the block is reached") {
  std::mt19937_64 rng(36);
  for (int round = 0; round < 100; ++round) {
    std::vector<Msg> longer = conversation(rng, 3 + rng() % 4);
    LlmKeyOptions o;
    o.conversation = LlmAnchor::kBlocks;
    o.conversation_blocks = 1 + rng() % 3;
    // The first user message alone fills the blocks: any prefix holding it has the anchor.
    size_t first = 0;
    while (longer[first].role == "system") ++first;
    longer[first].text += std::string(64 * o.conversation_blocks, 'u');
    const std::vector<Msg> prefix(longer.begin(), longer.begin() + first + 1);
    const Scan a = scan(chat(prefix), o, 7);
    const Scan b = scan(chat(longer, false), o, 13);
    CHECK(a.keys.has_conversation);
    CHECK(a.keys.conversation == b.keys.conversation);
  }
}

TEST_CASE("llm_key: explicit fields") {
  LlmKeyOptions o;
  o.explicit_fields = {"prompt_cache_key", "user"};
  const std::string msgs = chat({{"system", "s"}, {"user", "hi"}});
  const std::string head = msgs.substr(0, msgs.size() - 1);
  const Scan both = scan(head + R"(,"user":"alice","prompt_cache_key":"pck-9"})", o);
  CHECK(both.keys.explicit_key);
  CHECK(both.keys.explicit_index == 0);
  CHECK(both.explicit_value == "pck-9");
  const Scan low = scan(head + R"(,"user":"alice","temperature":1})", o);
  CHECK(low.keys.explicit_index == 1);
  CHECK(low.explicit_value == "alice");
  // The lower-priority field does not end the scan: a better one may follow.
  const Scan better = scan(R"({"user":"alice","prompt_cache_key":"k","messages":[]})", o);
  CHECK(better.explicit_value == "k");
  const Scan not_string = scan(head + R"(,"user":{"id":"alice"},"prompt_cache_key":7})", o);
  CHECK_FALSE(not_string.keys.explicit_key);
  CHECK(not_string.status == LlmScan::kDone);
  const Scan nested =
      scan(R"({"metadata":{"user":"x"},"messages":[{"role":"user","content":"a"}]})", o);
  CHECK_FALSE(nested.keys.explicit_key);
  const std::string big(1000, 'k');
  const Scan truncated = scan(R"({"prompt_cache_key":")" + big + "\"}", o, 100);
  CHECK(truncated.explicit_value == big.substr(0, LlmKeyScanner::kMaxExplicit));
  // Found first, with the anchors: the scan stops there, before the messages' end.
  const std::string upto = R"({"prompt_cache_key":"k","messages":[{"role":"system","content":"s"},)"
                           R"({"role":"user","content":"hi"})";
  const Scan early = scan(upto + R"(,{"role":"assistant","content":"x"}]})", o, 1);
  CHECK(early.status == LlmScan::kDone);
  CHECK(early.keys.anchor_offset == upto.size());
}

TEST_CASE("llm_key: refused bodies are kInvalid") {
  for (const char* bad : {"not json", "[1,2]", "\"str\"", "42", "null", "{\"a\":}", "{\"a\" 1}",
                          "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}",  // truncated
                          "", "{\"a\":\"\xFF\"}"}) {
    const std::string_view b = bad;
    CAPTURE(b);
    CHECK(scan(bad).status == LlmScan::kInvalid);
  }
  std::string deep = "{\"a\":";
  for (int i = 0; i < 40; ++i) deep += "[";
  CHECK(scan(deep).status == LlmScan::kInvalid);
  std::string ok = "{\"a\":";
  for (int i = 0; i < 30; ++i) ok += "[";
  for (int i = 0; i < 30; ++i) ok += "]";
  CHECK(scan(ok + "}").status == LlmScan::kDone);
  // Bytes after the top-level object are not read: the keys are known at its end.
  CHECK(scan("{\"a\":1}}").status == LlmScan::kDone);
  // After kInvalid nothing more is read.
  LlmKeyScanner s;
  LlmKeyOptions o;
  s.reset(o);
  CHECK(s.feed("[", false) == LlmScan::kInvalid);
  CHECK(s.feed("]", true) == LlmScan::kInvalid);
}

TEST_CASE("llm_key: kDone stops just past the first user message") {
  const std::string first = R"({"messages":[{"content":"rules","role":"system"},)"
                            R"({"content":"question","role":"user"})";
  const std::string body = first + R"(,{"role":"assistant","content":")" + std::string(5000, 'a') +
                           R"("}],"model":"m"})";
  const Scan s = scan(body, {}, 1);
  CHECK(s.status == LlmScan::kDone);
  CHECK(s.keys.anchor_offset == first.size());
  CHECK(s.keys.blocks == 0);  // neither chain filled a block: the assistant text was not read
  // A bigger feed: the offset counts whole feeds, and the parse still stops at the message's
  // end (the assistant text is not hashed).
  const Scan big = scan(body, {}, 1000);
  CHECK(big.keys.anchor_offset == 1000);
  CHECK(big.keys.blocks == 0);
  CHECK(scan(body).keys.blocks == 0);
  // Without a system message, a top-level `system` may still come: kDone waits for the end.
  const std::string no_system = R"({"messages":[{"role":"user","content":"q"}],"model":"m"})";
  const Scan w = scan(no_system, {}, 1);
  CHECK(w.status == LlmScan::kDone);
  CHECK(w.keys.anchor_offset == no_system.size());
  // Keys known before kDone (the caller's cap): the conversation, with the tenant not settled.
  LlmKeyScanner sc;
  LlmKeyOptions o;
  sc.reset(o);
  CHECK(sc.feed(no_system.substr(0, 45), false) == LlmScan::kMore);
  CHECK(sc.keys().has_conversation);
  CHECK(sc.keys().anchor_offset == 45);
}

TEST_CASE("llm_key: media parts are hashed by their URL or data, and a reset scanner is fresh") {
  const std::string big(300000, 'B');
  const Scan a = scan(chat({{"user", "see", "data:" + big}}), {}, 16384);
  const Scan b = scan(chat({{"user", "see", "data:" + big + "C"}}), {}, 16384);
  CHECK(a.keys.conversation != b.keys.conversation);
  CHECK(a.keys.conversation ==
        scan(chat({{"user", "see", "data:" + big}}), {}, 777).keys.conversation);
  const Scan anthropic =
      scan(R"({"messages":[{"role":"user","content":[{"type":"text","text":"see"},)"
           R"({"type":"image","source":{"type":"base64","media_type":"image/png",)"
           R"("data":"data:)" +
           big + R"("}}]}]})");
  CHECK(anthropic.keys.conversation == a.keys.conversation);

  LlmKeyScanner s;
  LlmKeyOptions o;
  for (int i = 0; i < 3; ++i) {
    s.reset(o);
    const std::string body = chat({{"system", "x"}, {"user", std::to_string(i % 2)}});
    REQUIRE(s.feed(body, true) == LlmScan::kDone);
    CHECK(s.keys().conversation == scan(body).keys.conversation);
  }
}

TEST_CASE("llm_key: a reset scanner allocates nothing per request") {
  std::string nested = R"({"tools":[{"a":{"b":[[[{"c":[1]}]]]}}],)";
  const std::vector<std::string> bodies = {
      chat({{"system", std::string(5000, 's')}, {"user", "q", "data:" + std::string(9000, 'I')}},
           false),
      nested + R"("messages":[{"content":"a\u0062\n","role":"user"}]})",
      R"({"prompt":[[1,2,3],[4]],"user":")" + std::string(1000, 'u') + "\"}",
      R"({"input":"x","instructions":")" + std::string(300, 'i') + "\"}"};
  LlmKeyOptions o;
  o.explicit_fields = {"prompt_cache_key", "user"};
  LlmKeyScanner s;
  const auto scan_all = [&] {
    for (const std::string& b : bodies) {
      s.reset(o);
      for (size_t at = 0; at < b.size(); at += 100) {
        if (s.feed(std::string_view(b).substr(at, 100), at + 100 >= b.size()) != LlmScan::kMore) {
          break;
        }
      }
      CHECK(s.keys().has_conversation);
    }
  };
  scan_all();  // the parser's stack grows to what these bodies need, once
  const uint64_t before = test::operator_new_calls();
  scan_all();
  scan_all();
  CHECK(test::operator_new_calls() - before == 0);
}

// Scans `body` kRounds times in 16 KiB pieces with one scanner; prints MB/s.
void throughput(const char* what, const std::string& body) {
  LlmKeyScanner s;
  LlmKeyOptions o;
  constexpr int kRounds = 40;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < kRounds; ++i) {
    s.reset(o);
    LlmScan st = LlmScan::kMore;
    for (size_t at = 0; at < body.size() && st == LlmScan::kMore; at += 16384) {
      st = s.feed(std::string_view(body).substr(at, 16384), at + 16384 >= body.size());
    }
    REQUIRE(st == LlmScan::kDone);
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double mb = static_cast<double>(body.size()) * kRounds / 1e6;
  std::printf("llm_key: %s, %zu bytes in 16 KiB pieces: %.0f MB/s, %.0f us per body\n", what,
              body.size(), mb / secs, secs * 1e6 / kRounds);
  CHECK(s.keys().has_conversation);
}

TEST_CASE("llm_key: throughput of a 220 KB chat body in 16 KiB pieces (printed, not asserted)") {
  // Content before role, no system message: the whole body is read (the worst case).
  std::mt19937_64 rng(220);
  std::string code, prose;
  while (code.size() < 220000) {
    code += "line " + std::to_string(rng()) + " {\"code\": [1, 2]} \\ \"quoted\"\n";
  }
  while (prose.size() < 220000) prose += "word" + std::to_string(rng() % 1000) + ' ';
  throughput("prose", chat({{"user", prose}}, false));
  throughput("code (escapes)", chat({{"user", code}}, false));
}

}  // namespace
}  // namespace rondel::proxy
