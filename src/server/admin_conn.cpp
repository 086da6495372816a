// AdminConn: one connection of the admin listener (reads one request, answers it, closes),
// under the admin's header and idle timeouts; and the listener's side of Admin: open, close,
// the connection cap.
#include <sys/resource.h>

#include <algorithm>
#include <string>
#include <string_view>
#include <utility>

#include "rondel/http/parser.h"
#include "rondel/server/admin.h"
#include "rondel/server/daemon.h"

namespace rondel::server {

namespace {

constexpr size_t kMaxAdminRequest = 16 * 1024;
// The admin listener's share of the descriptor limit: at most 1/kAdminFdShare of RLIMIT_NOFILE.
constexpr uint64_t kAdminFdShare = 16;
// Refused connections are logged at most once per this interval (with the count since).
constexpr uint64_t kRefusalLogMs = 1000;

// The reason phrases the admin endpoint sends.
constexpr std::pair<int, std::string_view> kReasons[] = {
    {200, "OK"}, {400, "Bad Request"}, {401, "Unauthorized"}, {403, "Forbidden"},
    {404, "Not Found"}, {405, "Method Not Allowed"}, {408, "Request Timeout"},
    {409, "Conflict"}, {413, "Content Too Large"}, {431, "Request Header Fields Too Large"},
    {500, "Internal Server Error"}, {503, "Service Unavailable"}};

std::string_view reason(int status) noexcept {
  for (const auto& [code, text] : kReasons) {
    if (code == status) return text;
  }
  return "Error";
}

}  // namespace

// One admin connection: reads one request, answers it, closes. Listed in Admin::conns_ from
// construction to destruction (or to abort()). Timeouts (one timer): the request head must
// arrive within header_timeout of the accept; after it, each wait on the client (the next body
// byte, the response being taken) is bounded by idle_timeout. A head that is late gets 408.
class AdminConn final : public net::HandleCloser {
 public:
  explicit AdminConn(Admin& admin) : admin_(&admin), parser_(http::Limits{}) {
    admin.conns_.push_back(this);
  }
  ~AdminConn() override { detach(); }

  // Closes the connection at once (shutdown) and forgets its Admin, which may go before the
  // handles' close callbacks run.
  void abort() noexcept {
    detach();
    close();
  }

  // Accepts the pending connection of `server` and starts reading. On failure the object
  // closes its handles and deletes itself.
  void accept(uv_stream_t* server) {
    uv_tcp_init(server->loop, &tcp_);
    uv_timer_init(server->loop, &timer_);
    tcp_.data = this;
    timer_.data = this;
    write_req_.data = this;
    if (uv_accept(server, stream()) != 0) {
      close();
      return;
    }
    arm(admin_->limits_.header_timeout_ms);
    if (uv_read_start(stream(), &on_alloc, &on_read) != 0) close();
  }

 private:
  uv_stream_t* stream() noexcept { return reinterpret_cast<uv_stream_t*>(&tcp_); }
  void close() noexcept {
    close_handle(reinterpret_cast<uv_handle_t*>(&timer_));
    close_handle(reinterpret_cast<uv_handle_t*>(&tcp_));
  }
  void on_all_closed() noexcept override { delete this; }
  void arm(uint64_t ms) noexcept { uv_timer_start(&timer_, &on_timeout, ms, 0); }
  void detach() noexcept {
    if (admin_ == nullptr) return;
    auto& conns = admin_->conns_;
    conns.erase(std::find(conns.begin(), conns.end(), this));
    admin_ = nullptr;
  }

  static void on_timeout(uv_timer_t* t) noexcept {
    auto* c = static_cast<AdminConn*>(t->data);
    if (c->answered_) {
      c->close();  // the client did not take the answer within idle_timeout
      return;
    }
    c->respond(408, "text/plain", "request timeout\n");
  }

  static void on_alloc(uv_handle_t* h, size_t, uv_buf_t* buf) noexcept {
    auto* c = static_cast<AdminConn*>(h->data);
    *buf = uv_buf_init(c->rbuf_, sizeof c->rbuf_);
  }

  static void on_read(uv_stream_t* s, ssize_t n, const uv_buf_t* buf) noexcept {
    auto* c = static_cast<AdminConn*>(s->data);
    if (n < 0) {
      c->close();
      return;
    }
    c->received_ += static_cast<size_t>(n);
    if (c->head_done_ && n > 0) c->arm(c->admin_->limits_.idle_timeout_ms);  // the body moves
    c->feed(buf->base, static_cast<size_t>(n));
  }

  // Runs the parser over `len` bytes at `p`; answers once the request is complete or bad.
  void feed(const char* p, size_t len) {
    // Until kNeedMore: after kHead or kBody the parser may end the message with no more bytes.
    while (!answered_) {
      http::Step st = parser_.feed(p, len);
      p += st.consumed;
      len -= st.consumed;
      if (st.event == http::Event::kError) {
        respond(parser_.error().status, "text/plain", "bad request\n");
        return;
      }
      if (st.event == http::Event::kHead) {
        head_done_ = true;
        arm(admin_->limits_.idle_timeout_ms);
        if (parser_.head().method == "POST" && Admin::accepts_post(parser_.head().target)) {
          post_target_ = parser_.head().target;  // the head ends with the message
          continue;
        }
      }
      if (!post_target_.empty() && collect_post(st)) return;
      if (st.event == http::Event::kHead) {
        const auto& h = parser_.head();
        if (h.framing == http::Framing::kLength && h.content_length > Admin::kMaxAdminBody) {
          respond(413, "application/json", "{\"error\":\"request body too large\"}\n");
          return;
        }
        continue;  // the message ends right away (no body) or after its body
      }
      if (st.event == http::Event::kBody && post_target_.empty()) {
        if (body_.size() + st.body.size() > Admin::kMaxAdminBody) {
          respond(413, "application/json", "{\"error\":\"request body too large\"}\n");
          return;
        }
        body_.append(st.body);
        continue;
      }
      if (st.event == http::Event::kMessageEnd && post_target_.empty()) {
        answer();
        return;
      }
      if (st.event == http::Event::kNeedMore) break;
    }
    if (!answered_ && received_ > kMaxAdminRequest && post_target_.empty()) {
      respond(431, "text/plain", "request too large\n");
    }
  }

  // A POST route's body: gathers it and answers at its end. Returns true once answered.
  bool collect_post(const http::Step& st) {
    if (st.event == http::Event::kBody) {
      if (post_body_.size() + st.body.size() > Admin::kMaxPostBody) {
        respond(413, "text/plain", "body too large\n");
        return true;
      }
      post_body_.append(st.body);
      return false;
    }
    if (st.event != http::Event::kMessageEnd) return false;
    int status = 200;
    std::string ctype, body;
    admin_->handle_post(post_target_, post_body_, status, ctype, body);
    respond(status, ctype, body);
    return true;
  }

  // The whole request is in: hand it to the admin.
  void answer() {
    const auto& h = parser_.head();
    AdminRequest req{h.method, h.target, {}, body_};
    for (const auto& f : h.headers) {
      if (http::iequals(f.name, "authorization")) req.authorization = f.value;
    }
    AdminResponse res;
    admin_->handle(req, res);
    respond(res.status, res.content_type, res.body, h.method == "HEAD", res.headers);
  }

  void respond(int status, std::string_view ctype, std::string_view body, bool head_only = false,
               std::string_view extra_headers = {}) {
    answered_ = true;
    uv_read_stop(stream());
    arm(admin_->limits_.idle_timeout_ms);  // the client has this long to take the answer
    out_ = "HTTP/1.1 " + std::to_string(status) + " " + std::string(reason(status)) +
           "\r\nContent-Type: " + std::string(ctype) +
           "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n" +
           std::string(extra_headers) + "Cache-Control: no-store\r\nConnection: close\r\n\r\n";
    if (!head_only) out_ += body;
    uv_buf_t b = uv_buf_init(out_.data(), static_cast<unsigned>(out_.size()));
    if (uv_write(&write_req_, stream(), &b, 1, &on_written) != 0) close();
  }

  static void on_written(uv_write_t* req, int) noexcept {
    static_cast<AdminConn*>(req->data)->close();
  }

  Admin* admin_;  // null once detached (abort): no callback that uses it runs after that
  uv_tcp_t tcp_{};
  uv_timer_t timer_{};
  uv_write_t write_req_{};
  http::RequestParser parser_;
  char rbuf_[4096];
  size_t received_ = 0;
  bool head_done_ = false;
  bool answered_ = false;
  std::string body_;  // the request body, at most Admin::kMaxAdminBody bytes
  std::string out_;
  std::string post_target_;  // set while reading the body of a POST route
  std::string post_body_;
};

Admin::~Admin() { close(); }

std::string Admin::configure(const config::AdminConfig& cfg) {
  limits_.header_timeout_ms = cfg.header_timeout_ms;
  limits_.idle_timeout_ms = cfg.idle_timeout_ms;
  limits_.max_connections = cfg.max_connections;
  rlimit nofile{};
  if (::getrlimit(RLIMIT_NOFILE, &nofile) != 0 || nofile.rlim_cur == RLIM_INFINITY) return {};
  const uint64_t share = std::max<uint64_t>(1, nofile.rlim_cur / kAdminFdShare);
  if (limits_.max_connections <= share) return {};
  limits_.max_connections = static_cast<uint32_t>(share);
  return "configured=" + std::to_string(cfg.max_connections) + " used=" +
         std::to_string(share) + " nofile=" + std::to_string(nofile.rlim_cur) +
         " reason=at_most_1/" + std::to_string(kAdminFdShare) + "_of_the_descriptor_limit";
}

core::Result<bool> Admin::open(const config::Address& bind) {
  auto accept = [this](uv_stream_t* server) {
    if (conns_.size() >= limits_.max_connections) {
      refuse(server);
      return;
    }
    (new AdminConn(*this))->accept(server);
  };
  auto l = net::TcpListener::open(daemon_.loop(), bind.host, bind.port, false, 128, accept);
  if (!l) return l.error();
  listener_ = *l;
  return true;
}

// Over the cap: accepted and closed at once (no byte sent), so the pending connection leaves
// the kernel's queue and holds no descriptor; logged at most once per kRefusalLogMs.
void Admin::refuse(uv_stream_t* server) {
  auto* t = new uv_tcp_t;
  uv_tcp_init(server->loop, t);
  uv_accept(server, reinterpret_cast<uv_stream_t*>(t));
  uv_close(reinterpret_cast<uv_handle_t*>(t),
           [](uv_handle_t* h) noexcept { delete reinterpret_cast<uv_tcp_t*>(h); });
  ++refused_;
  const uint64_t now = uv_now(server->loop);
  if (refused_logged_at_ != 0 && now < refused_logged_at_ + kRefusalLogMs) return;
  refused_logged_at_ = now;
  daemon_.log().log(proxy::Level::kWarn, "admin_connection_refused",
                    "open=" + std::to_string(conns_.size()) + " max=" +
                        std::to_string(limits_.max_connections) + " refused_total=" +
                        std::to_string(refused_));
}

void Admin::close() noexcept {
  if (listener_ != nullptr) {
    listener_->close();
    listener_ = nullptr;
  }
  // Shutdown does not wait for an admin client: an idle one would hold the loop until its
  // timeout.
  while (!conns_.empty()) conns_.back()->abort();
}

}  // namespace rondel::server
