// Worker: per-loop proxy context, buffer pool and session registry.
#include "rondel/proxy/worker.h"

#include "rondel/proxy/session.h"

namespace rondel::proxy {

std::string_view reject_name(Reject r) noexcept {
  static constexpr std::string_view kNames[] = {
      "bad_request", "uri_too_long", "header_too_large", "body_too_large", "bad_version",
      "upgrade",     "no_backend",   "backend_error",    "timeout",        "client_timeout",
      "max_connections"};
  static_assert(std::size(kNames) == static_cast<size_t>(Reject::kCount));
  return kNames[static_cast<size_t>(r)];
}

BufferPool::~BufferPool() {
  for (char* b : free_) delete[] b;
}

char* BufferPool::get() {
  ++outstanding_;
  if (free_.empty()) return new char[kSize];
  char* b = free_.back();
  free_.pop_back();
  return b;
}

void BufferPool::put(char* buf) noexcept {
  --outstanding_;
  // Keep a bounded reserve; beyond it, give memory back.
  if (free_.size() < 1024) {
    free_.push_back(buf);
  } else {
    delete[] buf;
  }
}

Worker::Worker(uv_loop_t* loop, Logger& log, LogSink& access_log, WorkerStats& stats)
    : loop_(loop), log_(log), access_log_(access_log), stats_(stats) {}

Worker::~Worker() = default;

void Worker::publish(std::shared_ptr<const Snapshot> snap) {
  if (snap && scratch_.size() < snap->max_scratch_words()) scratch_.resize(snap->max_scratch_words());
  snapshot_ = std::move(snap);
}

std::span<uint64_t> Worker::scratch(size_t words) {
  if (scratch_.size() < words) scratch_.resize(words);
  return std::span<uint64_t>(scratch_.data(), words);
}

void Worker::accept(uv_stream_t* server, const std::string& listener_name) {
  ClientSession::accept(*this, server, listener_name);
}

void Worker::drain() {
  draining_ = true;
  ClientSession* s = sessions_head_;
  while (s != nullptr) {
    ClientSession* next = s->next_;
    s->drain();
    s = next;
  }
}

void Worker::close_all() {
  draining_ = true;
  while (sessions_head_ != nullptr) sessions_head_->close_now_public();
}

size_t Worker::active_exchanges() const noexcept {
  size_t n = 0;
  for (ClientSession* s = sessions_head_; s != nullptr; s = s->next_) n += s->in_exchange() ? 1 : 0;
  return n;
}

void Worker::add_session(ClientSession* s) noexcept {
  s->prev_ = nullptr;
  s->next_ = sessions_head_;
  if (sessions_head_ != nullptr) sessions_head_->prev_ = s;
  sessions_head_ = s;
  ++sessions_;
}

void Worker::remove_session(ClientSession* s) noexcept {
  if (s->prev_ != nullptr) s->prev_->next_ = s->next_;
  else if (sessions_head_ == s) sessions_head_ = s->next_;
  else return;  // not in the list
  if (s->next_ != nullptr) s->next_->prev_ = s->prev_;
  s->prev_ = s->next_ = nullptr;
  --sessions_;
}

}  // namespace rondel::proxy
