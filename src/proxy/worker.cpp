// Worker: per-loop proxy context, buffer pool and session registry.
#include "rondel/proxy/worker.h"

#include "rondel/proxy/backend_state.h"
#include "rondel/proxy/exchange.h"
#include "rondel/proxy/client_connection.h"

namespace rondel::proxy {

std::string_view reject_name(Reject r) noexcept {
  static constexpr std::string_view kNames[] = {
      "bad_request", "uri_too_long", "header_too_large", "body_too_large", "bad_version",
      "upgrade",     "no_backend",   "backend_error",    "timeout",        "client_timeout",
      "max_connections", "no_subset_member"};
  static_assert(std::size(kNames) == static_cast<size_t>(Reject::kCount));
  return kNames[static_cast<size_t>(r)];
}

Reject reject_for_status(uint16_t status) noexcept {
  switch (status) {
    case 413: return Reject::kBodyTooLarge;
    case 414: return Reject::kUriTooLong;
    case 431: return Reject::kHeaderTooLarge;
    case 501: return Reject::kUpgrade;
    case 505: return Reject::kVersion;
    default: return Reject::kBadRequest;
  }
}

BufferPool::~BufferPool() {
  for (auto& list : free_) {
    for (char* b : list) delete[] b;
  }
}

char* BufferPool::get(Class c) {
  ++outstanding_;
  auto& list = free_[static_cast<size_t>(c)];
  if (list.empty()) return new char[size_of(c)];
  char* b = list.back();
  list.pop_back();
  return b;
}

void BufferPool::put(char* buf, Class c) noexcept {
  --outstanding_;
  // Keep a bounded reserve; beyond it, give memory back.
  auto& list = free_[static_cast<size_t>(c)];
  if (list.size() < kMaxFree[static_cast<size_t>(c)]) {
    list.push_back(buf);
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
      splice_poller_(loop),
      timeouts_(loop, &ClientConnection::on_timeout),
      id_(id) {}

Worker::~Worker() {
  for (auto& c : codec_states_) c.reset();  // their pooled objects may hold exchanges
  for (Exchange* ex : free_exchanges_) delete ex;
}

Exchange* Worker::take_exchange() noexcept {
  if (free_exchanges_.empty()) return new (std::nothrow) Exchange(*this);
  Exchange* ex = free_exchanges_.back();  // most recently returned first (warm in cache)
  free_exchanges_.pop_back();
  return ex;
}

void Worker::give_exchange(Exchange* ex) noexcept {
  if (ex->write_pending()) {
    ex->set_pool_on_written();  // on_backend_written gives it back again
    return;
  }
  ex->recycle();
  keep_or_delete(free_exchanges_, ex, kPoolReserve);
}

void Worker::publish(std::shared_ptr<const Snapshot> snap) {
  if (snap && scratch_.size() < snap->max_scratch_words()) scratch_.resize(snap->max_scratch_words());
  std::shared_ptr<const Snapshot> old = std::move(snapshot_);
  snapshot_ = std::move(snap);
  drain_removed_listeners();
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

void Worker::drain_removed_listeners() noexcept {
  if (!snapshot_) return;  // stopping: close_all follows
  // Connections of a listener the new configuration no longer has: HTTP/2 ones get GOAWAY
  // NO_ERROR (their open streams finish, on the snapshot they started with); HTTP/1 ones answer
  // their next request 503 instead (Http1Session::on_request_head).
  connections_.for_each([&](ClientConnection& c) {
    if (snapshot_->route(c.listener_name()).config == nullptr) c.listener_removed();
  });
}

std::span<uint64_t> Worker::scratch(size_t words) {
  if (scratch_.size() < words) scratch_.resize(words);
  return std::span<uint64_t>(scratch_.data(), words);
}

void Worker::accept(uv_stream_t* server, const std::string& listener_name) {
  ClientConnection::accept(*this, server, listener_name);
}

void Worker::drain() {
  draining_ = true;
  connections_.for_each([](ClientConnection& c) { c.drain(); });
}

void Worker::close_all() {
  draining_ = true;
  while (ClientConnection* c = connections_.front()) c->close();
  timeouts_.close();
  splice_poller_.close();  // every relay went with its exchange above
  flush_closed_ = true;
  if (flush_check_ready_) uv_close(reinterpret_cast<uv_handle_t*>(&flush_check_), nullptr);
}

void Worker::add_connection(ClientConnection& c) noexcept {
  connections_.push_front(c);
  sessions_.fetch_add(1, std::memory_order_relaxed);
}

void Worker::remove_connection(ClientConnection& c) noexcept {
  auto& node = static_cast<util::ListNode<ClientConnectionTag>&>(c);
  if (!node.linked()) return;
  node.unlink();
  sessions_.fetch_sub(1, std::memory_order_relaxed);
}

void Worker::want_flush(ClientCodec* s) noexcept {
  if (flush_closed_) return;  // stopping: the session is closed with the rest
  if (!flush_check_ready_) {
    // Made by the first HTTP/2 session that writes, as the TimeoutQueue makes its timer: a
    // worker that never served HTTP/2 (or failed to start) has no handle to close.
    uv_check_init(loop_, &flush_check_);
    flush_check_.data = this;
    flush_check_ready_ = true;
    flush_.reserve(64);
  }
  flush_.push_back(s);
  auto* check = reinterpret_cast<uv_handle_t*>(&flush_check_);
  if (!uv_is_active(check)) uv_check_start(&flush_check_, &Worker::on_flush_check);
}

void Worker::cancel_flush(ClientCodec* s) noexcept {
  for (ClientCodec*& q : flush_) {
    if (q == s) q = nullptr;
  }
}

void Worker::on_flush_check(uv_check_t* h) noexcept {
  auto* w = static_cast<Worker*>(h->data);
  // A session that asks again while being served (its write completed at once and a stream
  // queued more) is appended and served in this same pass.
  for (size_t i = 0; i < w->flush_.size(); ++i) {
    ClientCodec* s = w->flush_[i];
    w->flush_[i] = nullptr;
    if (s != nullptr) s->on_flush();
  }
  w->flush_.clear();
  uv_check_stop(h);
}

}  // namespace rondel::proxy
