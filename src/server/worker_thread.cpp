// WorkerThread: an extra worker's loop, its listeners and the daemon's commands.
#include "rondel/server/worker_thread.h"

#include <algorithm>
#include <cstdio>

namespace rondel::server {

namespace {
constexpr uint64_t kFlushTickMs = 200;  // log flush
}

WorkerThread::WorkerThread(uint32_t id, proxy::WorkerStats& stats, const std::string& access_log,
                           const std::string& error_log, proxy::Level level,
                           proxy::AccessFormat access_format)
    : id_(id) {
  error_sink_.open(error_log, stderr);
  access_sink_.open(access_log, stdout);
  access_sink_.set_format(access_format);
  log_.set_level(level);
  uv_loop_init(&loop_);
  worker_ = std::make_unique<proxy::Worker>(&loop_, log_, access_sink_, stats, id);
  // Handles are created here, before the thread runs the loop: no other thread touches it yet.
  uv_async_init(&loop_, &async_, &on_async);
  async_.data = this;
  uv_timer_init(&loop_, &tick_);
  tick_.data = this;
}

WorkerThread::~WorkerThread() {
  if (!started_) {
    // Never started: run the loop here to close what was opened.
    stop();
    run();
    return;
  }
  stop();
  join();
}

void WorkerThread::set_exchange_hook(ExchangeHook hook, void* ctx) noexcept {
  worker_->on_exchange = hook;
  worker_->on_exchange_ctx = ctx;
}

void WorkerThread::start() {
  uv_timer_start(&tick_, &on_tick, kFlushTickMs, kFlushTickMs);
  started_ = true;
  thread_ = std::thread([this] { run(); });
}

void WorkerThread::run() noexcept {
  apply();  // commands sent before start
  uv_run(&loop_, UV_RUN_DEFAULT);
  uv_run(&loop_, UV_RUN_NOWAIT);
  uv_loop_close(&loop_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopped_loop_ = true;
  }
  applied_cv_.notify_all();
  // worker_ itself (plain memory by now) goes with this object, after the join: the daemon may
  // still read its counters.
  access_sink_.flush();
  error_sink_.flush();
}

void WorkerThread::join() {
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

void WorkerThread::publish(std::shared_ptr<const proxy::Snapshot> snap) {
  std::shared_ptr<const proxy::Snapshot> old;  // released outside the lock
  command([&] {
    old = std::move(snapshot_);  // a snapshot superseded before the loop picked it up
    snapshot_ = std::move(snap);
    has_snapshot_ = true;
  });
}

void WorkerThread::set_listeners(std::vector<ListenerSpec> listeners) {
  command([&] {
    listener_specs_ = std::move(listeners);
    has_listeners_ = true;
  });
}

void WorkerThread::drain() {
  command([&] { drain_ = true; });
}

void WorkerThread::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return;  // once: the loop closes async_ after acting on it
    stop_ = true;
  }
  uv_async_send(&async_);
}

void WorkerThread::reopen_logs() {
  command([&] { reopen_ = true; });
}

void WorkerThread::on_async(uv_async_t* a) noexcept {
  static_cast<WorkerThread*>(a->data)->apply();
}

void WorkerThread::apply() noexcept {
  uint64_t seen;
  {
    std::lock_guard<std::mutex> lock(mu_);
    seen = sent_;
  }
  if (!stopped_) apply_pending();
  {
    std::lock_guard<std::mutex> lock(mu_);
    applied_ = std::max(applied_, seen);
  }
  applied_cv_.notify_all();
}

bool WorkerThread::wait_applied(std::chrono::milliseconds limit) {
  std::unique_lock<std::mutex> lock(mu_);
  const uint64_t want = sent_;
  return applied_cv_.wait_for(lock, limit, [&] { return applied_ >= want || stopped_loop_; });
}

void WorkerThread::apply_pending() noexcept {
  bool has_snap, has_listeners, drain, stop, reopen;
  std::shared_ptr<const proxy::Snapshot> snap;
  std::vector<ListenerSpec> specs;
  {
    std::lock_guard<std::mutex> lock(mu_);
    has_snap = has_snapshot_;
    snap = std::move(snapshot_);
    has_snapshot_ = false;
    has_listeners = has_listeners_;
    specs = std::move(listener_specs_);
    has_listeners_ = false;
    drain = drain_;
    stop = stop_;
    reopen = reopen_;
    drain_ = reopen_ = false;
  }
  if (reopen) {
    access_sink_.reopen();
    error_sink_.reopen();
  }
  if (stop) {
    stopped_ = true;
    close_listeners();
    worker_->close_all();
    worker_->publish(nullptr);  // closes this worker's idle backend connections
    uv_timer_stop(&tick_);
    uv_close(reinterpret_cast<uv_handle_t*>(&tick_), nullptr);
    uv_close(reinterpret_cast<uv_handle_t*>(&async_), nullptr);
    access_sink_.flush();
    error_sink_.flush();
    return;
  }
  if (has_snap && !worker_->draining()) worker_->publish(std::move(snap));
  if (has_listeners && !worker_->draining()) apply_listeners(specs);
  if (drain) {
    close_listeners();
    worker_->drain();
  }
}

void WorkerThread::apply_listeners(const std::vector<ListenerSpec>& specs) noexcept {
  std::vector<Listener> next;
  for (const auto& s : specs) {
    std::string key = s.name + "|" + s.host + ":" + std::to_string(s.port);
    bool kept = false;
    for (auto& l : listeners_) {
      if (l.listener != nullptr && l.key == key) {
        next.push_back(l);
        l.listener = nullptr;
        kept = true;
        break;
      }
    }
    if (kept) continue;
    std::string name = s.name;
    proxy::Worker* w = worker_.get();
    auto l = net::TcpListener::open(&loop_, s.host, s.port, true, 1024,
                                    [w, name](uv_stream_t* server) { w->accept(server, name); });
    if (!l) {
      log_.log(proxy::Level::kError, "listen_failed",
               "worker=" + std::to_string(id_) + " listener=" + s.name + " error=\"" +
                   l.error().message + "\"");
      continue;
    }
    next.push_back({key, *l});
  }
  for (auto& l : listeners_) {
    if (l.listener != nullptr) l.listener->close();
  }
  listeners_ = std::move(next);
}

void WorkerThread::close_listeners() noexcept {
  for (auto& l : listeners_) {
    if (l.listener != nullptr) l.listener->close();
  }
  listeners_.clear();
}

void WorkerThread::on_tick(uv_timer_t* t) noexcept {
  auto* w = static_cast<WorkerThread*>(t->data);
  w->access_sink_.flush();
  w->error_sink_.flush();
}

}  // namespace rondel::server
