// Fuzz target: the HTTP/2 glue (proxy::Http2Session and its streams over nghttp2) fed arbitrary
// frames through a scripted transport, with no backend (the listener has no pool: every stream
// that starts is answered 503 by rondel itself).
//
// Input: a sequence of chunks, each [control byte][length: u16][bytes]. The client preface is
// sent first on its own; each chunk's bytes are then one read. Control bit 0: the session's
// writes stay pending until the next chunk (backpressure); bit 1: the peer ends the connection
// (EOF) after this chunk. Invariants: nothing crashes or leaks (ASan/UBSan in the fuzz build);
// the session reads only while it asked to, writes at most one queue at a time, and once the
// input is spent and the worker closes everything, the session is gone: no open client
// connection, no session in the worker's list, the listener's connection count back at 0.
#include <uv.h>

#include <cstring>
#include <memory>

#include "fuzz_util.h"
#include "rondel/config/config.h"
#include "rondel/proxy/client_connection.h"
#include "rondel/proxy/http2_session.h"
#include "rondel/proxy/log.h"
#include "rondel/proxy/worker.h"

using namespace rondel;

namespace {

constexpr char kPreface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

// A transport whose reads come from the fuzz input and whose writes go nowhere.
class ScriptedTransport final : public net::Transport {
 public:
  net::TransportEvents* events = nullptr;
  bool reading = false;
  bool closed = false;      // close() was called (reported to the events by the driver)
  bool hold_writes = false;  // writes stay pending until release()
  net::OutQueue* pending = nullptr;

  int start_reading() noexcept override {
    reading = !closed;
    return 0;
  }
  void stop_reading() noexcept override { reading = false; }
  int write(net::OutQueue& q) noexcept override {
    FUZZ_CHECK(pending == nullptr);  // one write at a time
    if (closed) return UV_ECANCELED;
    if (hold_writes) {
      q.pending = true;
      q.sent_now = 0;
      pending = &q;
      return 1;
    }
    q.sent_now = q.bytes;
    q.clear();
    return 0;
  }
  int shutdown() noexcept override { return 0; }
  void close() noexcept override {
    closed = true;
    reading = false;
  }
  bool closing() const noexcept override { return closed; }
  const net::PeerAddr& peer() const noexcept override { return peer_; }
  bool local_address(sockaddr_storage*) const noexcept override { return false; }

  // Delivers `n` bytes as reads while the session reads (its buffer may be smaller).
  void deliver(const char* p, size_t n) noexcept {
    while (n > 0 && reading && !closed) {
      uv_buf_t b;
      events->on_transport_alloc(&b);
      if (b.len == 0) return;
      size_t k = n < b.len ? n : b.len;
      std::memcpy(b.base, p, k);
      p += k;
      n -= k;
      events->on_transport_read(static_cast<ssize_t>(k));
    }
  }
  void release() noexcept {
    if (pending == nullptr) return;
    net::OutQueue* q = pending;
    pending = nullptr;
    q->clear();
    if (!closed) events->on_transport_written(0);
  }

 private:
  net::PeerAddr peer_;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const config::ListenerConfig kListener = [] {
    config::ListenerConfig l;
    l.name = "fuzz";
    l.h2_max_header_list_size = 4096;
    return l;
  }();
  uv_loop_t loop;
  if (uv_loop_init(&loop) != 0) return 0;
  {
    proxy::LogSink sink;
    proxy::Logger log(sink);
    proxy::WorkerStats stats;
    proxy::Worker worker(&loop, log, sink, stats);
    auto state = std::make_shared<proxy::ListenerState>("fuzz");
    ScriptedTransport t;
    t.events = proxy::ClientConnection::attach(worker, t, {&kListener, nullptr, state, nullptr},
                                               proxy::ClientProtocol::kHttp2);
    if (t.events != nullptr) {
      bool reported = false;
      auto report_close = [&] {
        if (t.closed && !reported) {
          reported = true;
          t.release();
          t.events->on_transport_closed();  // the session may be freed after its timer closes
        }
      };
      t.deliver(kPreface, sizeof kPreface - 1);
      fuzz::Reader in(data, size);
      while (!in.empty() && !t.closed) {
        uint8_t ctl = in.u8();
        uint16_t len = in.u16();
        std::string chunk;
        for (uint16_t i = 0; i < len && !in.empty(); ++i) chunk.push_back(static_cast<char>(in.u8()));
        t.release();
        t.hold_writes = (ctl & 1) != 0;
        t.deliver(chunk.data(), chunk.size());
        if ((ctl & 2) != 0 && t.reading && !t.closed) t.events->on_transport_read(UV_EOF);
        uv_run(&loop, UV_RUN_NOWAIT);
      }
      t.hold_writes = false;
      t.release();
      report_close();
      worker.close_all();
      report_close();
    } else {
      worker.close_all();
    }
    uv_run(&loop, UV_RUN_DEFAULT);
    FUZZ_CHECK(stats.client_connections_open.load() == 0);
    FUZZ_CHECK(worker.sessions() == 0);
    FUZZ_CHECK(state->open.load() == 0);
  }
  uv_loop_close(&loop);
  return 0;
}
