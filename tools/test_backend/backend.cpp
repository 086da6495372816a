// Backend: listener, signals, shared state and the list of connections.
#include "backend.h"

#include <cinttypes>
#include <csignal>
#include <cstdio>
#include <utility>

#include "connection.h"

namespace rondel::test_backend {

namespace {

constexpr int kBacklog = 1024;

// Appends `text` as a JSON string literal.
void append_json_string(std::string& out, std::string_view text) {
  out.push_back('"');
  for (char ch : text) {
    auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(ch);
    } else if (c < 0x20) {
      char esc[8];
      std::snprintf(esc, sizeof esc, "\\u%04x", c);
      out.append(esc);
    } else {
      out.push_back(ch);
    }
  }
  out.push_back('"');
}

}  // namespace

Backend::Backend(uv_loop_t* loop, Options options)
    : loop_(loop),
      options_(std::move(options)),
      cache_(options_.cache_objects),
      healthy_(!options_.health_fail) {
  fixed_headers_ = "X-Backend: " + options_.name + "\r\n";
  // The pattern holds every window of kBodyPiece bytes starting within the first period.
  std::string unit = options_.name + "\n";
  while (pattern_.size() < kBodyPiece + unit.size()) pattern_ += unit;
}

core::Result<std::string> Backend::start() {
  if (!options_.ledger_path.empty()) {
    if (auto opened = ledger_.open(options_.ledger_path); !opened) return opened.error();
  }
  sockaddr_storage addr{};
  std::string host = options_.listen_host == "localhost" ? "127.0.0.1" : options_.listen_host;
  if (uv_ip4_addr(host.c_str(), options_.listen_port, reinterpret_cast<sockaddr_in*>(&addr)) != 0 &&
      uv_ip6_addr(host.c_str(), options_.listen_port, reinterpret_cast<sockaddr_in6*>(&addr)) != 0) {
    return core::fail("bad listen host '" + options_.listen_host + "' (want an IP address)");
  }
  uv_tcp_init(loop_, &listener_);
  listener_.data = this;
  listener_open_ = true;
  int rc = uv_tcp_bind(&listener_, reinterpret_cast<const sockaddr*>(&addr), 0);
  if (rc == 0) {
    rc = uv_listen(reinterpret_cast<uv_stream_t*>(&listener_), kBacklog, &Backend::on_connection);
  }
  if (rc != 0) {
    return core::fail("cannot listen on " + options_.listen_host + ":" +
                      std::to_string(options_.listen_port) + ": " + uv_strerror(rc));
  }
  sockaddr_storage bound{};
  int len = sizeof bound;
  uv_tcp_getsockname(&listener_, reinterpret_cast<sockaddr*>(&bound), &len);
  char ip[64] = {};
  int port = 0;
  std::string address;
  if (bound.ss_family == AF_INET6) {
    auto* a6 = reinterpret_cast<sockaddr_in6*>(&bound);
    uv_ip6_name(a6, ip, sizeof ip);
    port = ntohs(a6->sin6_port);
    address = "[" + std::string(ip) + "]:" + std::to_string(port);
  } else {
    auto* a4 = reinterpret_cast<sockaddr_in*>(&bound);
    uv_ip4_name(a4, ip, sizeof ip);
    port = ntohs(a4->sin_port);
    address = std::string(ip) + ":" + std::to_string(port);
  }

  uv_signal_init(loop_, &sigterm_);
  uv_signal_init(loop_, &sigint_);
  sigterm_.data = sigint_.data = this;
  signals_open_ = true;
  uv_signal_start(&sigterm_, &Backend::on_signal, SIGTERM);
  uv_signal_start(&sigint_, &Backend::on_signal, SIGINT);
  return address;
}

void Backend::stop() noexcept {
  if (stopping_) return;
  stopping_ = true;
  if (listener_open_) {
    listener_open_ = false;
    uv_close(reinterpret_cast<uv_handle_t*>(&listener_), &Backend::on_handle_closed);
  }
  if (signals_open_) {
    signals_open_ = false;
    uv_close(reinterpret_cast<uv_handle_t*>(&sigterm_), &Backend::on_handle_closed);
    uv_close(reinterpret_cast<uv_handle_t*>(&sigint_), &Backend::on_handle_closed);
  }
  for (Connection* c = connections_; c != nullptr; c = c->next_) c->close(false);
}

void Backend::on_handle_closed(uv_handle_t*) noexcept {}

void Backend::on_connection(uv_stream_t* server, int status) noexcept {
  auto* self = static_cast<Backend*>(server->data);
  if (status < 0 || self->stopping_) return;
  Connection::accept(*self, server);
}

void Backend::on_signal(uv_signal_t* handle, int) noexcept {
  static_cast<Backend*>(handle->data)->stop();
}

void Backend::reset_counters() noexcept {
  uint64_t in_flight = stats_.in_flight;
  uint64_t open = stats_.connections_open;
  stats_ = Stats{};
  stats_.in_flight = in_flight;
  stats_.max_in_flight = in_flight;
  stats_.connections_open = open;
  stats_.connections_total = open;
  cache_.clear();
}

std::string Backend::stats_json() const {
  std::string out = "{\"name\":";
  append_json_string(out, options_.name);
  char numbers[512];
  std::snprintf(numbers, sizeof numbers,
                ",\"requests\":%" PRIu64 ",\"in_flight\":%" PRIu64 ",\"max_in_flight\":%" PRIu64
                ",\"bytes_in\":%" PRIu64 ",\"hits\":%" PRIu64 ",\"misses\":%" PRIu64 ",\"bytes_out\":%" PRIu64
                ",\"connections_open\":%" PRIu64 ",\"connections_total\":%" PRIu64
                ",\"healthy\":%s}\n",
                stats_.requests, stats_.in_flight, stats_.max_in_flight, stats_.bytes_in,
                stats_.hits, stats_.misses, stats_.bytes_out, stats_.connections_open, stats_.connections_total,
                healthy_ ? "true" : "false");
  out += numbers;
  return out;
}

void Backend::link(Connection* c) noexcept {
  c->prev_ = nullptr;
  c->next_ = connections_;
  if (connections_ != nullptr) connections_->prev_ = c;
  connections_ = c;
}

void Backend::unlink(Connection* c) noexcept {
  if (c->prev_ != nullptr) c->prev_->next_ = c->next_;
  if (c->next_ != nullptr) c->next_->prev_ = c->prev_;
  if (connections_ == c) connections_ = c->next_;
  c->prev_ = c->next_ = nullptr;
}

}  // namespace rondel::test_backend
