// A TCP listening socket on a libuv loop that hands each accepted connection to a callback.
#pragma once

#include <uv.h>

#include <functional>
#include <memory>
#include <string>

#include "rondel/core/result.h"
#include "rondel/net/uv_util.h"

namespace rondel::net {

class TcpListener final : public HandleCloser {
 public:
  // Called for each pending connection; the callee calls uv_accept(server, client) itself.
  using OnConnection = std::function<void(uv_stream_t* server)>;

  // Binds and listens. With reuse_port, SO_REUSEPORT is set so several loops may each own a
  // listener on the same address. Loop thread only. The returned object is closed by close().
  static core::Result<TcpListener*> open(uv_loop_t* loop, const std::string& host,
                                         uint16_t port, bool reuse_port, int backlog, OnConnection on_conn);

  // Stops listening and frees the object once libuv has closed the handle.
  void close() noexcept { close_handle(reinterpret_cast<uv_handle_t*>(&tcp_)); }
  uint16_t port() const noexcept { return port_; }
  const std::string& bind_string() const noexcept { return bind_; }

 private:
  TcpListener() = default;
  void on_all_closed() noexcept override { delete this; }
  static void on_connection(uv_stream_t* server, int status) noexcept;

  uv_tcp_t tcp_{};
  OnConnection on_conn_;
  uint16_t port_ = 0;
  std::string bind_;
};

}  // namespace rondel::net
