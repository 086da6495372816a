// ServerModel (see server_model.h).
#include "server_model.h"

#include <algorithm>

#include "prompt.h"

namespace kvsim {

ServerModel::ServerModel(const ServerConfig& config)
    : config_(config), cache_(config.kv_blocks) {}

void ServerModel::account_kv(double now) {
  if (totals_.first_at < 0) {
    totals_.first_at = now;
    totals_.last_at = now;
  }
  double use = config_.kv_blocks ? double(cache_.in_use()) / config_.kv_blocks : 0;
  totals_.kv_use_area += use * std::max(0.0, now - totals_.last_at);
  totals_.last_at = std::max(totals_.last_at, now);
}

double ServerModel::kv_use_mean(double now) const {
  if (totals_.first_at < 0 || now <= totals_.first_at) return 0;
  double use = config_.kv_blocks ? double(cache_.in_use()) / config_.kv_blocks : 0;
  double area = totals_.kv_use_area + use * std::max(0.0, now - totals_.last_at);
  return area / (now - totals_.first_at);
}

bool ServerModel::try_start(Job& job, double now, std::vector<Started>& started) {
  if (running_.size() >= config_.max_num_seqs) return false;
  uint32_t hits = cache_.match(job.chain);
  uint32_t total = blocks_for(job.prompt_tokens, job.output_tokens);
  uint32_t anonymous = total - static_cast<uint32_t>(job.chain.size());
  account_kv(now);
  if (!cache_.acquire(job.chain, anonymous)) return false;
  uint32_t cached = std::min(hits * kTokensPerBlock, job.prompt_tokens);
  const TimeModel& t = config_.time;
  double prefill_start = std::max(now, prefill_free_at_);
  double prefill_end = prefill_start + t.p0 + t.p1 * (job.prompt_tokens - cached);
  prefill_free_at_ = prefill_end;
  started.push_back(Started{job.id, cached, now, prefill_end + t.d,
                            prefill_end + t.d * std::max<uint32_t>(job.output_tokens, 1)});
  totals_.requests++;
  totals_.prompt_tokens += job.prompt_tokens;
  totals_.cached_tokens += cached;
  totals_.output_tokens += job.output_tokens;
  totals_.kv_use_max = std::max(totals_.kv_use_max, double(cache_.in_use()) / config_.kv_blocks);
  running_.emplace(job.id, Running{std::move(job.chain), anonymous});
  return true;
}

bool ServerModel::submit(Job job, double now, std::vector<Started>& started) {
  if (blocks_for(job.prompt_tokens, job.output_tokens) > config_.kv_blocks) return false;
  if (waiting_.empty() && try_start(job, now, started)) return true;
  waiting_tokens_ += job.prompt_tokens;
  waiting_.push_back(std::move(job));
  totals_.max_waiting = std::max(totals_.max_waiting, waiting_.size());
  return true;
}

void ServerModel::finish(uint64_t id, double now, std::vector<Started>& started) {
  auto it = running_.find(id);
  if (it == running_.end()) return;
  account_kv(now);
  cache_.release(it->second.chain, it->second.anonymous);
  running_.erase(it);
  while (!waiting_.empty()) {
    uint32_t tokens = waiting_.front().prompt_tokens;
    if (!try_start(waiting_.front(), now, started)) break;
    waiting_tokens_ -= tokens;
    waiting_.pop_front();
  }
}

double ServerModel::prefill_backlog(double now) const {
  const TimeModel& t = config_.time;
  return std::max(0.0, prefill_free_at_ - now) + t.p0 * double(waiting_.size()) +
         t.p1 * double(waiting_tokens_);
}

}  // namespace kvsim
