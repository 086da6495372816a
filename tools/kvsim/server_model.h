// ServerModel: one simulated inference server's scheduler and time model, in model seconds
// (no I/O, no clock: the caller passes `now` and arms its own timers).
//
// At most max_num_seqs requests run; the others wait in FIFO order (vLLM's scheduler: a request
// is admitted only when its KV blocks fit; the head of the queue blocks the rest). An admitted
// request pins its prompt's blocks and its output's blocks in the KvCache. Prefill is compute
// bound, so prefills run one at a time in admission order: a request's prefill starts when it
// is admitted and the previous prefill has ended, and lasts p0 + p1 x (prompt tokens not
// already cached). Decode runs beside other requests: token i (1-based) is out at
// prefill end + i x d, so the first token comes at prefill end + d and the last at
// prefill end + d x output tokens. Decode batching effects are not modelled.
#pragma once

#include <cstdint>
#include <deque>
#include <unordered_map>
#include <vector>

#include "kv_cache.h"

namespace kvsim {

struct TimeModel {
  double p0 = 0.0;  // seconds per prefill
  double p1 = 0.0;  // seconds per uncached prompt token
  double d = 0.0;   // seconds per output token
};

struct ServerConfig {
  uint32_t kv_blocks = 0;
  uint32_t max_num_seqs = 0;
  TimeModel time;
};

struct Job {
  uint64_t id = 0;
  std::vector<uint64_t> chain;  // the prompt's full-block hashes
  uint32_t prompt_tokens = 0;
  uint32_t output_tokens = 0;
};

// A request admitted to run, with its timeline (model seconds).
struct Started {
  uint64_t id = 0;
  uint32_t cached_tokens = 0;
  double admitted_at = 0;
  double first_token_at = 0;
  double finish_at = 0;
};

class ServerModel {
 public:
  explicit ServerModel(const ServerConfig& config);

  // Takes a request arriving at `now`. Returns false (and takes nothing) when it can never fit
  // in the cache. Appends to `started` the requests admitted now: this one, if it runs at once.
  bool submit(Job job, double now, std::vector<Started>& started);
  // The running request `id` ended at `now` (its finish_at): frees its blocks and appends the
  // waiting requests that are admitted in its place.
  void finish(uint64_t id, double now, std::vector<Started>& started);

  // Leading blocks of `chain` this server holds (what a request would hit here now).
  uint32_t match(const std::vector<uint64_t>& chain) const { return cache_.match(chain); }

  // Model seconds from `now` until a request submitted now would start its prefill, at most:
  // the prefill running or queued in the lane, plus a full prefill (p0 + p1 x prompt tokens) for
  // every waiting request (their hits are not known before they are admitted).
  double prefill_backlog(double now) const;

  size_t running() const { return running_.size(); }
  size_t waiting() const { return waiting_.size(); }
  size_t load() const { return running_.size() + waiting_.size(); }
  const KvCache& cache() const { return cache_; }
  const ServerConfig& config() const { return config_; }

  struct Totals {
    uint64_t requests = 0;
    uint64_t prompt_tokens = 0;
    uint64_t cached_tokens = 0;
    uint64_t output_tokens = 0;
    size_t max_waiting = 0;
    double kv_use_max = 0;       // highest in_use / capacity seen
    double kv_use_area = 0;      // integral of in_use / capacity over model time
    double first_at = -1;        // model time of the first request (the area's start)
    double last_at = 0;          // model time of the last change
  };
  const Totals& totals() const { return totals_; }
  // Time-weighted mean of in_use / capacity from the first request up to `now`.
  double kv_use_mean(double now) const;

 private:
  bool try_start(Job& job, double now, std::vector<Started>& started);
  void account_kv(double now);

  ServerConfig config_;
  KvCache cache_;
  double prefill_free_at_ = 0;  // when the prefill lane is next free
  std::deque<Job> waiting_;
  uint64_t waiting_tokens_ = 0;  // prompt tokens of the waiting requests
  struct Running {
    std::vector<uint64_t> chain;
    uint32_t anonymous = 0;
  };
  std::unordered_map<uint64_t, Running> running_;
  Totals totals_;
};

}  // namespace kvsim
