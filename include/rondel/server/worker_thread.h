// WorkerThread: one extra proxy worker (workers: N > 1) on its own thread and event loop.
//
// Worker 0 runs on the daemon's loop; workers 1..N-1 are WorkerThreads. Each owns a uv_loop, a
// proxy::Worker, its own SO_REUSEPORT listeners (the kernel spreads connections over the
// listeners of one address), its sessions, backend connections and log sinks (appending whole
// lines to the same files as the daemon's). Shared with the other workers: the snapshot (an
// immutable shared_ptr), BackendState/PoolState atomics (so the bounded-load cap is global),
// WorkerStats atomics and the metrics hook (which writes only this worker's shard).
//
// The daemon talks to it only through the commands below: each stores its request under a mutex
// and wakes the loop with uv_async_send; the loop applies them in order. Commands may be called
// from any thread; everything else runs on the worker's own thread.
#pragma once

#include <uv.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "rondel/net/listener.h"
#include "rondel/proxy/log.h"
#include "rondel/proxy/snapshot.h"
#include "rondel/proxy/worker.h"

namespace rondel::server {

// One listener every worker serves: `port` is the port worker 0 actually bound (so a configured
// port 0 gives every worker the same one).
struct ListenerSpec {
  std::string name;
  std::string host;
  uint16_t port = 0;
};

class WorkerThread {
 public:
  using ExchangeHook = void (*)(void* ctx, const proxy::ExchangeRecord& rec);

  // Opens the log files (same paths and access-log format as the daemon's) and prepares the
  // loop; start() runs it.
  WorkerThread(uint32_t id, proxy::WorkerStats& stats, const std::string& access_log,
               const std::string& error_log, proxy::Level level,
               proxy::AccessFormat access_format = proxy::AccessFormat::kText);
  ~WorkerThread();  // stop() + join()
  WorkerThread(const WorkerThread&) = delete;
  WorkerThread& operator=(const WorkerThread&) = delete;

  // Sets the metrics hook (before start()).
  void set_exchange_hook(ExchangeHook hook, void* ctx) noexcept;
  void start();

  // Commands (any thread).
  void publish(std::shared_ptr<const proxy::Snapshot> snap);
  void set_listeners(std::vector<ListenerSpec> listeners);
  void drain();       // close the listeners, then drain the sessions
  void stop();        // close everything; the loop ends and the thread exits
  void reopen_logs();
  void join();
  // Waits (at most `limit`) until the loop has applied every command sent so far; false on
  // timeout. The daemon calls it after start() and after a listener change, so that "started",
  // READY=1 and "reload_ok" mean every worker accepts on every listener.
  bool wait_applied(std::chrono::milliseconds limit);

  // Open client sessions of this worker (relaxed; for the daemon's drain check).
  size_t sessions() const noexcept { return worker_->sessions(); }
  size_t active_exchanges() const noexcept { return worker_->active_exchanges(); }
  uint32_t id() const noexcept { return id_; }

 private:
  // Records a command for the loop (under mu_) and wakes it.
  template <class F>
  void command(F&& record) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      record();
      ++sent_;
    }
    uv_async_send(&async_);
  }
  struct Listener {
    std::string key;  // name|host:port
    net::TcpListener* listener = nullptr;
  };
  static void on_async(uv_async_t* a) noexcept;
  static void on_tick(uv_timer_t* t) noexcept;
  void apply() noexcept;          // apply_pending(), then records what it covered
  void apply_pending() noexcept;
  void apply_listeners(const std::vector<ListenerSpec>& specs) noexcept;
  void close_listeners() noexcept;
  void run() noexcept;

  uint32_t id_;
  uv_loop_t loop_{};
  uv_async_t async_{};
  uv_timer_t tick_{};
  proxy::LogSink error_sink_;
  proxy::LogSink access_sink_;
  proxy::Logger log_{error_sink_};
  std::unique_ptr<proxy::Worker> worker_;
  std::vector<Listener> listeners_;
  std::thread thread_;
  bool started_ = false;
  bool stopped_ = false;  // loop thread

  // Pending commands, guarded by mu_.
  std::mutex mu_;
  bool has_snapshot_ = false;
  std::shared_ptr<const proxy::Snapshot> snapshot_;
  bool has_listeners_ = false;
  std::vector<ListenerSpec> listener_specs_;
  bool drain_ = false;
  bool stop_ = false;
  bool reopen_ = false;
  uint64_t sent_ = 0;     // commands recorded
  uint64_t applied_ = 0;  // commands the loop has acted on
  bool stopped_loop_ = false;  // the loop has ended: nothing more will be applied
  std::condition_variable applied_cv_;
};

}  // namespace rondel::server
