// Worker: per-loop proxy context, buffer pool and session registry.
#include "rondel/proxy/worker.h"

#include "rondel/proxy/backend_state.h"
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

Worker::Worker(uv_loop_t* loop, Logger& log, LogSink& access_log, WorkerStats& stats,
               uint32_t id)
    : loop_(loop),
      log_(log),
      access_log_(access_log),
      stats_(stats),
      timeouts_(loop, &ClientSession::on_timeout),
      id_(id) {}

Worker::~Worker() {
  for (ExchangeBuffers* xb : free_exchanges_) delete xb;
}

namespace {
bool same_limits(const http::Limits& a, const http::Limits& b) noexcept {
  return a.max_request_line == b.max_request_line && a.max_header_bytes == b.max_header_bytes &&
         a.max_headers == b.max_headers && a.max_body_bytes == b.max_body_bytes;
}
constexpr size_t kExchangeReserve = 1024;
}  // namespace

ExchangeBuffers* Worker::take_exchange(const http::Limits& limits) noexcept {
  // Most recently returned first (warm in cache); a listener with other limits looks further.
  for (size_t i = free_exchanges_.size(); i-- > 0;) {
    ExchangeBuffers* xb = free_exchanges_[i];
    if (same_limits(xb->limits, limits)) {
      free_exchanges_[i] = free_exchanges_.back();
      free_exchanges_.pop_back();
      return xb;
    }
  }
  return new (std::nothrow) ExchangeBuffers(limits);
}

void Worker::give_exchange(ExchangeBuffers* xb) noexcept {
  xb->req_parser.reset();
  xb->to_backend.clear();
  xb->to_client.clear();
  // A pooled exchange keeps the capacity of the heads it rewrote; one huge head must not pin
  // its memory for ever, so strings grown past the bound are given back.
  for (std::string* s : {&xb->req_head_out, &xb->resp_head_out}) {
    if (s->capacity() > kMaxPooledStringCapacity) std::string().swap(*s);
  }
  if (free_exchanges_.size() >= kExchangeReserve) {
    delete xb;
    return;
  }
  try {
    free_exchanges_.push_back(xb);  // allocates only when the reserve grows (doubling)
  } catch (...) {
    delete xb;
  }
}

void Worker::publish(std::shared_ptr<const Snapshot> snap) {
  if (snap && scratch_.size() < snap->max_scratch_words()) scratch_.resize(snap->max_scratch_words());
  std::shared_ptr<const Snapshot> old = std::move(snapshot_);
  snapshot_ = std::move(snap);
  if (old) {
    // Idle connections are this loop's handles: close them here, not in ~BackendState (which
    // may run on another thread once the last snapshot naming the backend is released).
    for (const auto& p : old->pools()) {
      for (size_t i = 0; i < p->size(); ++i) {
        BackendState& b = p->backend(static_cast<core::BackendIndex>(i));
        if (!snapshot_ || b.retired.load(std::memory_order_relaxed)) b.close_idle(id_);
      }
    }
  }
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
  timeouts_.close();
}


void Worker::add_session(ClientSession* s) noexcept {
  s->prev_ = nullptr;
  s->next_ = sessions_head_;
  if (sessions_head_ != nullptr) sessions_head_->prev_ = s;
  sessions_head_ = s;
  sessions_.fetch_add(1, std::memory_order_relaxed);
}

void Worker::remove_session(ClientSession* s) noexcept {
  if (s->prev_ != nullptr) s->prev_->next_ = s->next_;
  else if (sessions_head_ == s) sessions_head_ = s->next_;
  else return;  // not in the list
  if (s->next_ != nullptr) s->next_->prev_ = s->prev_;
  s->prev_ = s->next_ = nullptr;
  sessions_.fetch_sub(1, std::memory_order_relaxed);
}

}  // namespace rondel::proxy
