// ApiCall: one HTTP/1.1 request to a control-plane API (etcd's JSON gateway, the Kubernetes API
// server) on the daemon's libuv loop, over net::TcpTransport::connect or tls::TlsTransport in
// client mode (the transports backend connections use), its response read by the project's own
// http::ResponseParser and its body streamed to the caller as it arrives (a watch
// is one long chunked body). No second HTTP stack: this is the thin driver around those two.
//
// One connection per call (`Connection: close`): discovery sources make a request every few
// seconds at most, and a watch holds its connection for minutes. Loop thread only; never throws.
#pragma once

#include <uv.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "rondel/config/config.h"
#include "rondel/core/result.h"
#include "rondel/http/parser.h"
#include "rondel/net/out_queue.h"
#include "rondel/net/tcp_transport.h"
#include "rondel/net/uv_util.h"
#include "rondel/tls/client_context.h"
#include "rondel/tls/tls_transport.h"

namespace rondel::server {

struct ApiRequest {
  std::string method = "GET";
  std::string path;  // appended to the endpoint's base path; with its query string
  std::string body;  // sent with Content-Length (POST/PUT); JSON
  std::vector<std::pair<std::string, std::string>> headers;  // e.g. {"Authorization", "Bearer X"}
  uint64_t timeout_ms = 5000;  // connect, TLS handshake and the response head, together
  uint64_t idle_ms = 0;        // once the head came: no byte for this long ends it; 0 = never
};

// What a call reports, never from inside ApiCall::start. on_end runs exactly once, last (unless
// the call was cancelled first); the call frees itself after it returns, so the owner forgets
// its pointer there.
struct ApiHandlers {
  std::function<void(uint16_t status)> on_head;      // the final response's status
  std::function<void(std::string_view body)> on_data;  // de-chunked body bytes, in order
  // "" once the whole response arrived; else why it failed ("connect: connection refused",
  // "timeout", "bad response: ...", "closed": the server closed the body before its end).
  std::function<void(std::string_view error)> on_end;
};

class ApiCall final : public net::HandleCloser, private net::TransportEvents {
 public:
  // Starts a request to `ep` (TLS with `tls`, which must be set when ep.tls). Never null.
  static ApiCall* start(uv_loop_t* loop, const config::ApiUrl& ep,
                        std::shared_ptr<const tls::ClientContext> tls, ApiRequest req,
                        ApiHandlers handlers);
  // Stops the call: no handler runs any more; it frees itself once its handles are closed.
  // Not after on_end (the call is gone then).
  void cancel() noexcept;

 private:
  ApiCall(uv_loop_t* loop, const config::ApiUrl& ep, ApiRequest req, ApiHandlers handlers);
  void on_all_closed() noexcept override { delete this; }
  void begin(std::shared_ptr<const tls::ClientContext> tls) noexcept;
  void connect(const sockaddr* sa) noexcept;
  // Ends the call with `error` from the next loop turn (a failure inside start()).
  void fail_soon(std::string error) noexcept;
  void send_request() noexcept;
  void parse(const char* p, size_t n) noexcept;
  void eof() noexcept;
  void end(std::string_view error) noexcept;
  void arm(uint64_t ms) noexcept;
  static void on_resolved(uv_getaddrinfo_t* req, int status, addrinfo* res) noexcept;
  static void on_timer(uv_timer_t* t) noexcept;
  // The transport's side.
  void on_transport_connected(int status) noexcept override;
  void on_transport_alloc(uv_buf_t* buf) noexcept override;
  void on_transport_read(ssize_t n) noexcept override;
  void on_transport_written(int status) noexcept override;
  void on_transport_closed() noexcept override { other_closed(); }
  net::Transport& transport() noexcept {
    return tls_ ? static_cast<net::Transport&>(*tls_) : tcp_;
  }

  uv_loop_t* loop_;
  config::ApiUrl ep_;
  ApiRequest req_;
  ApiHandlers handlers_;
  net::TcpTransport tcp_;
  std::unique_ptr<tls::TlsTransport> tls_;  // over tcp_ for https
  uv_timer_t timer_{};
  uv_getaddrinfo_t resolve_{};
  bool resolving_ = false;
  bool connecting_ = false;  // a transport's connect was started: it must be closed
  bool head_seen_ = false;
  bool ended_ = false;
  std::string pending_error_;  // fail_soon()
  std::string head_;           // the request, while it is written
  net::OutQueue out_;
  http::ResponseParser parser_;
};

// A GET of `path` at http://`addr` (a member's admin API) whose whole body, at most `max_body`
// bytes, is handed to `done` once: ("", status, body) when the response arrived whole, else
// (why, status so far, "") -- a body longer than max_body is rejected whole ("too long"),
// never read in part. `timeout_ms` bounds connect + head and each silence after it. The call
// is the caller's to cancel() until `done` runs. Loop thread only.
ApiCall* get_small(uv_loop_t* loop, const config::Address& addr, std::string path,
                   uint64_t timeout_ms, size_t max_body,
                   std::function<void(std::string_view error, uint16_t status, std::string& body)>
                       done);

// The TLS context for an https endpoint: `ca` a PEM bundle ("" = the system's trust store);
// null for http. "FILE: reason" when the CA cannot be read.
core::Result<std::shared_ptr<const tls::ClientContext>> api_tls_context(
    const std::string& source, const config::ApiUrl& ep, const std::string& ca);

}  // namespace rondel::server
