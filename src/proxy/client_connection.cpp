// ClientConnection: accept, admission, the PROXY stage, the TLS handshake, the codec from the
// table, the one client timeout, and the close that every client connection goes through.
#include "rondel/proxy/client_connection.h"

#include <new>

namespace rondel::proxy {

ClientConnection::ClientConnection(Worker& worker) noexcept : worker_(worker) {
  worker_.add_connection(*this);
  worker_.stats().client_connections_open.fetch_add(1, std::memory_order_relaxed);
  worker_.stats().client_connections_total.fetch_add(1, std::memory_order_relaxed);
}

ClientConnection::~ClientConnection() { delete codec_; }

void ClientConnection::accept(Worker& worker, uv_stream_t* server, const std::string& listener) {
  const auto& snap = worker.snapshot();
  ListenerRoute route = snap ? snap->route(listener) : ListenerRoute{};
  auto* c = new ClientConnection(worker);
  c->snap_ = snap;
  c->listener_cfg_ = route.config;
  c->listener_pool_ = route.pool;
  // The transport: plain TCP, or on a TLS listener a TlsTransport over it. accept() sets up the
  // socket's handle even when it fails, so close() closes it either way.
  int accepted = 0;
  if (route.tls != nullptr && route.config != nullptr && !worker.draining()) {
    c->tls_ = std::make_unique<tls::TlsTransport>(route.tls, c->tcp_,
                                                  static_cast<net::TransportEvents&>(*c));
    c->transport_ = c->tls_.get();
    accepted = c->tls_->accept(worker.loop(), server);  // UV_EBUSY: max_handshakes (counted)
  } else {
    accepted = c->tcp_.accept(worker.loop(), server, c);
  }
  if (accepted != 0 || route.config == nullptr || worker.draining()) {
    c->close();
    return;
  }
  // max_connections is per listener across every worker: one shared count per listener, kept
  // until the connection closes (even if a reload removes the listener meanwhile).
  if (!c->slot_.admit(route, worker.stats())) {
    c->close();
    return;
  }
  // PROXY protocol, whatever the codec: the transport reads the header first, and no byte
  // reaches the codec (or the TLS handshake) before it is whole; header_timeout bounds it.
  const config::ProxyProtocolConfig& pp = route.config->proxy_protocol;
  if (pp.enabled && c->tcp_.expect_proxy_header({pp.trusted,
                                                 {route.state, &route.state->proxy_protocol},
                                                 route.config->header_timeout_ms}) != 0) {
    c->close();
    return;
  }
  if (c->tls_ == nullptr) {
    c->install(choose_client_protocol(route.config, {}));
    return;
  }
  // TLS: the handshake's ALPN chooses the codec (on_transport_ready); until then the
  // connection's own timeout bounds the PROXY stage (header_timeout) or the silence before the
  // handshake (idle_timeout); the TLS transport bounds the handshake itself.
  c->transport_->start_reading();
  c->set_timeout(pp.enabled ? route.config->header_timeout_ms : route.config->idle_timeout_ms);
}

net::TransportEvents* ClientConnection::attach(Worker& worker, net::Transport& t,
                                               ListenerRoute route,
                                               ClientProtocol protocol) noexcept {
  auto* c = new (std::nothrow) ClientConnection(worker);
  if (c == nullptr) return nullptr;
  c->transport_ = &t;
  c->listener_cfg_ = route.config;
  c->listener_pool_ = route.pool;
  c->slot_.hold(std::move(route.state));
  c->install(protocol);
  return c;
}

void ClientConnection::install(ClientProtocol p) noexcept {
  codec_ = make_client_codec(p, *this);
  if (codec_ == nullptr) {
    close();  // out of memory
    return;
  }
  clear_timeout();  // the codec sets its own
  codec_->start();
  if (worker_.draining() && !closing_) codec_->drain();
}

void ClientConnection::close() noexcept {
  if (closing_) return;
  closing_ = true;
  if (codec_ != nullptr) codec_->on_closing();
  worker_.stats().client_connections_open.fetch_sub(1, std::memory_order_relaxed);
  slot_.release();
  worker_.remove_connection(*this);
  clear_timeout();
  transport_->close();
}

void ClientConnection::drain() noexcept {
  if (closing_) return;
  if (codec_ != nullptr) codec_->drain();
  else close();  // still in the TLS handshake: no request yet
}

void ClientConnection::listener_removed() noexcept {
  if (!closing_ && codec_ != nullptr) codec_->on_listener_removed();
}

void ClientConnection::refresh_snapshot() noexcept {
  if (worker_.snapshot() == snap_ || !slot_.state()) return;
  snap_ = worker_.snapshot();
  ListenerRoute r = snap_ ? snap_->route(slot_.name()) : ListenerRoute{};
  listener_cfg_ = r.config;
  listener_pool_ = r.pool;
}

std::string_view ClientConnection::client_ip() noexcept {
  const net::PeerAddr& peer = transport_->peer();
  if (peer.family != 6) return peer.ipv4();
  if (ip6_ == nullptr) {
    ip6_.reset(new (std::nothrow) char[46]);
    if (ip6_ == nullptr) return {};
    ip6_len_ = static_cast<uint8_t>(peer.format(ip6_.get(), 46));
  }
  return {ip6_.get(), ip6_len_};
}

void ClientConnection::set_timeout(uint64_t ms) noexcept {
  if (closing_) return;
  if (!worker_.timeouts().set(*this, ms)) close();
}

void ClientConnection::on_timeout(net::Timeout* t) noexcept {
  auto* c = static_cast<ClientConnection*>(t);
  if (c->closing_) return;
  if (c->codec_ == nullptr || c->awaiting_proxy_header()) {
    c->close();  // no PROXY header or no handshake in time: nothing was sent yet
    return;
  }
  c->codec_->on_timeout();
}

// The transport's events go to the codec; before it is installed (the TLS handshake) only the
// connection's end can come.
void ClientConnection::on_transport_alloc(uv_buf_t* buf) noexcept {
  if (codec_ != nullptr) codec_->on_alloc(buf);
  else *buf = uv_buf_init(nullptr, 0);
}

void ClientConnection::on_transport_read(ssize_t nread) noexcept {
  if (codec_ != nullptr) codec_->on_read(nread);
  else if (nread < 0) close();
}

void ClientConnection::on_transport_written(int status) noexcept {
  if (codec_ != nullptr) codec_->on_written(status);
}

void ClientConnection::on_transport_ready(std::string_view alpn) noexcept {
  if (closing_ || codec_ != nullptr) return;
  install(choose_client_protocol(listener_cfg_, alpn));
}

void ClientConnection::on_transport_closed() noexcept { delete this; }

}  // namespace rondel::proxy
