// rondel-microbench: Google Benchmark timings of owner lookup, bounded_pick and Selector::build
// for ring, rendezvous and Maglev (and jump hash) at N = 10, 100, 1000 backends, and of parsing
// one request head and one response head the way a session does, and writing them out again.
#include <benchmark/benchmark.h>

#include <atomic>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "rondel/core/backend_set.h"
#include "rondel/core/bounded.h"
#include "rondel/core/hash.h"
#include "rondel/core/jump.h"
#include "rondel/core/selector.h"
#include "rondel/http/parser.h"
#include "rondel/http/writer.h"

namespace rondel::bench {
namespace {

constexpr size_t kKeyCount = 4096;  // Power of two: the key index wraps with a mask.

// Returns N backends with ids "10.0.<i/256>.<i%256>:8080", weight 1.
core::BackendSet make_set(int64_t n) {
  std::vector<core::BackendSpec> specs;
  for (int64_t i = 0; i < n; ++i) {
    char id[32];
    std::snprintf(id, sizeof id, "10.0.%d.%d:8080", static_cast<int>(i / 256),
                  static_cast<int>(i % 256));
    specs.push_back({id, 1});
  }
  return std::move(*core::BackendSet::create(std::move(specs)));
}

// Returns kKeyCount hashes of distinct URI-like keys.
std::vector<uint64_t> make_hashes() {
  std::vector<uint64_t> h(kKeyCount);
  for (size_t i = 0; i < kKeyCount; ++i) h[i] = core::hash64("/obj/" + std::to_string(i));
  return h;
}

core::Selector make_selector(const core::BackendSet& set, core::Algorithm algo) {
  core::SelectorOptions o;
  o.algorithm = algo;
  return std::move(*core::Selector::build(set, o));
}

template <core::Algorithm A>
void bm_owner(benchmark::State& state) {
  core::BackendSet set = make_set(state.range(0));
  core::Selector sel = make_selector(set, A);
  std::vector<uint64_t> hashes = make_hashes();
  size_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(sel.owner(hashes[i++ & (kKeyCount - 1)]));
  }
}

void bm_jump(benchmark::State& state) {
  std::vector<uint64_t> hashes = make_hashes();
  const auto n = static_cast<int32_t>(state.range(0));
  size_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(core::jump_hash(hashes[i++ & (kKeyCount - 1)], n));
  }
}

// bounded_pick with 10 requests in flight per backend on average and c = 1.25 (cap 13).
// half_full = false: every backend holds 10, so the owner always has room (the common case).
// half_full = true: even backends hold 13 (full), odd ones 7, so about half of the picks spill.
template <core::Algorithm A, bool kHalfFull>
void bm_pick(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  core::BackendSet set = make_set(state.range(0));
  core::Selector sel = make_selector(set, A);
  std::vector<uint64_t> hashes = make_hashes();
  auto in_flight = std::make_unique<std::atomic<uint32_t>[]>(n);
  for (size_t b = 0; b < n; ++b) in_flight[b].store(kHalfFull ? (b % 2 ? 7 : 13) : 10);
  std::vector<uint32_t> weights(n, 1);
  std::vector<uint64_t> scratch(core::pick_scratch_words(sel));
  core::PickInput in;
  in.in_flight = std::span<const std::atomic<uint32_t>>(in_flight.get(), n);
  in.weights = weights;
  in.total_in_flight = 10 * n;
  in.total_weight = n;
  core::BoundedOptions opts;
  opts.balance_factor = 125;
  size_t i = 0;
  uint64_t spilled = 0;
  for (auto _ : state) {
    core::PickResult r = core::bounded_pick(sel, hashes[i++ & (kKeyCount - 1)], in, opts, scratch);
    spilled += r.backend != r.owner;
    benchmark::DoNotOptimize(r);
  }
  state.counters["spill"] =
      benchmark::Counter(static_cast<double>(spilled), benchmark::Counter::kAvgIterations);
}

template <core::Algorithm A>
void bm_build(benchmark::State& state) {
  core::BackendSet set = make_set(state.range(0));
  core::SelectorOptions o;
  o.algorithm = A;
  for (auto _ : state) {
    auto sel = core::Selector::build(set, o);
    benchmark::DoNotOptimize(sel);
  }
}

// A small GET as a load generator sends it, and a small response as rondel-test-backend answers
// it: the heads parsed per proxied exchange. Each iteration parses one whole message and resets
// the parser, as a keep-alive session does.
constexpr std::string_view kRequest =
    "GET /obj/4711 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nUser-Agent: wrk/4.2.0\r\n"
    "Accept: */*\r\nConnection: keep-alive\r\n\r\n";
constexpr std::string_view kResponse =
    "HTTP/1.1 200 OK\r\nX-Backend: b1\r\nContent-Type: application/octet-stream\r\n"
    "Content-Length: 16\r\nX-Request-Bytes: 101\r\n\r\n0123456789abcdef";

// Feeds wire until the message ends (kHead, then kBody / the zero-byte feed that ends it).
template <class Parser>
void parse_one(Parser& parser, std::string_view wire) {
  size_t off = 0;
  for (;;) {
    http::Step s = parser.feed(wire.data() + off, wire.size() - off);
    off += s.consumed;
    if (s.event == http::Event::kHead) benchmark::DoNotOptimize(parser.head().headers.size());
    if (s.event == http::Event::kMessageEnd || s.event == http::Event::kError ||
        s.event == http::Event::kNeedMore) {
      break;
    }
  }
}

void bm_parse_request(benchmark::State& state) {
  http::RequestParser parser(http::Limits{});
  for (auto _ : state) {
    parser.reset();
    parse_one(parser, kRequest);
  }
}

void bm_parse_response(benchmark::State& state) {
  http::ResponseParser parser(http::Limits{});
  for (auto _ : state) {
    parser.begin(false);
    parse_one(parser, kResponse);
  }
}

// Writes the heads rondel forwards for the exchange above: the request to the backend and the
// response to the client.
void bm_write_heads(benchmark::State& state) {
  http::RequestParser req(http::Limits{});
  parse_one(req, kRequest);
  http::ResponseParser resp(http::Limits{});
  resp.begin(false);
  parse_one(resp, kResponse);
  http::ForwardRequest fwd;
  fwd.client_ip = "10.1.2.3";
  const http::ClientFraming framing = http::choose_client_framing(req.head(), resp.head());
  std::string out;
  for (auto _ : state) {
    out.clear();
    http::write_request_head(req.head(), fwd, out);
    http::write_response_head(req.head(), resp.head(), framing, out);
    benchmark::DoNotOptimize(out.data());
  }
}

// The worst case for hop-by-hop detection within the default limits (max_headers 100, a 32 KiB
// head): 98 ordinary fields and one Connection field whose list of short tokens fills the rest of
// the head. No token names a field, so nothing ends a search early.
std::string hop_by_hop_worst_head() {
  const http::Limits limits;
  std::string wire = "GET /obj/4711 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n";
  for (size_t i = 0; i + 2 < limits.max_headers; ++i) {
    wire += "X-Field-" + std::to_string(i) + ": value\r\n";
  }
  wire += "Connection: keep-alive";
  const std::string_view kEnd = "\r\n\r\n";
  for (size_t i = 0;; ++i) {
    const std::string token = ", t" + std::to_string(i);
    if (wire.size() + token.size() + kEnd.size() > limits.max_header_bytes) break;
    wire += token;
  }
  return wire += kEnd;
}

// Parses that head and writes the request rondel forwards for it: per request, the whole cost
// of finding the fields Connection names (wherever the code does it).
void bm_hop_by_hop_worst(benchmark::State& state) {
  const std::string wire = hop_by_hop_worst_head();
  http::RequestParser req(http::Limits{});
  http::ForwardRequest fwd;
  fwd.client_ip = "10.1.2.3";
  parse_one(req, wire);
  if (req.head().headers.size() != http::Limits{}.max_headers) {
    state.SkipWithError("the worst-case head does not parse");
    return;
  }
  std::string out;
  for (auto _ : state) {
    req.reset();
    parse_one(req, wire);
    out.clear();
    http::write_request_head(req.head(), fwd, out);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * wire.size()));
}

constexpr auto kRing = core::Algorithm::kRing;
constexpr auto kRendezvous = core::Algorithm::kRendezvous;
constexpr auto kMaglev = core::Algorithm::kMaglev;

}  // namespace
}  // namespace rondel::bench

namespace rb = rondel::bench;

BENCHMARK(rb::bm_owner<rb::kRing>)->Name("owner/ring")->Arg(10)->Arg(100)->Arg(1000);
BENCHMARK(rb::bm_owner<rb::kRendezvous>)->Name("owner/rendezvous")->Arg(10)->Arg(100)->Arg(1000);
BENCHMARK(rb::bm_owner<rb::kMaglev>)->Name("owner/maglev")->Arg(10)->Arg(100)->Arg(1000);
BENCHMARK(rb::bm_jump)->Name("owner/jump")->Arg(10)->Arg(100)->Arg(1000);
BENCHMARK(rb::bm_pick<rb::kRing, false>)->Name("pick/ring")->Arg(10)->Arg(100)->Arg(1000);
BENCHMARK(rb::bm_pick<rb::kRendezvous, false>)
    ->Name("pick/rendezvous")->Arg(10)->Arg(100)->Arg(1000);
BENCHMARK(rb::bm_pick<rb::kMaglev, false>)->Name("pick/maglev")->Arg(10)->Arg(100)->Arg(1000);
BENCHMARK(rb::bm_pick<rb::kRing, true>)->Name("pick_half_full/ring")->Arg(10)->Arg(100)->Arg(1000);
BENCHMARK(rb::bm_pick<rb::kRendezvous, true>)
    ->Name("pick_half_full/rendezvous")->Arg(10)->Arg(100)->Arg(1000);
BENCHMARK(rb::bm_pick<rb::kMaglev, true>)
    ->Name("pick_half_full/maglev")->Arg(10)->Arg(100)->Arg(1000);
BENCHMARK(rb::bm_build<rb::kRing>)
    ->Name("build/ring")->Arg(10)->Arg(100)->Arg(1000)->Unit(benchmark::kMicrosecond);
BENCHMARK(rb::bm_build<rb::kRendezvous>)
    ->Name("build/rendezvous")->Arg(10)->Arg(100)->Arg(1000)->Unit(benchmark::kMicrosecond);
BENCHMARK(rb::bm_build<rb::kMaglev>)
    ->Name("build/maglev")->Arg(10)->Arg(100)->Arg(1000)->Unit(benchmark::kMicrosecond);
BENCHMARK(rb::bm_parse_request)->Name("parse/request_head");
BENCHMARK(rb::bm_parse_response)->Name("parse/response_head");
BENCHMARK(rb::bm_write_heads)->Name("write/request_and_response_head");
BENCHMARK(rb::bm_hop_by_hop_worst)->Name("hop_by_hop/worst_32k_head_parse_and_write");

BENCHMARK_MAIN();
