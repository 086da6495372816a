// Exchange, spliced response bodies: the rest of a Content-Length body goes from the backend
// socket to the client socket through a pooled pipe (net::SpliceRelay) and never enters user
// space; the parser is advanced over it afterwards. Everything else about the response (head,
// chunked or close-delimited bodies, reframing, TLS) stays on the copy path of
// exchange_response.cpp.
#include "rondel/proxy/backend_conn.h"
#include "rondel/proxy/backend_state.h"
#include "rondel/proxy/exchange.h"

namespace rondel::proxy {

bool Exchange::try_splice() noexcept {
  if (relay_ != nullptr) return true;
  if (st_.response != ResponseState::kStreaming || st_.conn->available() > 0) return false;
  uint64_t left = resp_parser_.length_body_left();
  if (left < kSpliceMinBytes) return false;
  int to = rq_.sink->sink_splice_fd();
  int from = st_.conn->fd();
  if (to < 0 || from < 0) return false;
  int err = 0;
  relay_ = net::SpliceRelay::start(worker_.loop(), worker_.pipes(), from, to, left, this, &err);
  if (relay_ == nullptr) return false;  // no pipe or descriptor now: copy this body
  st_.conn->pause_reading();
  return true;
}

void Exchange::cancel_splice() noexcept {
  if (relay_ == nullptr) return;
  relay_->cancel();
  relay_ = nullptr;
}

void Exchange::on_splice_progress(size_t in, size_t out) noexcept {
  if (in > 0 && st_.conn != nullptr && st_.conn->state() != nullptr) {
    st_.conn->state()->counters.bytes_in.fetch_add(in, std::memory_order_relaxed);
  }
  if (out > 0) {
    resp_parser_.skip_body(out);
    rq_.sink->sink_spliced(out);
  }
  backend_progress();  // every moved byte starts the I/O inactivity timeout again
}

void Exchange::on_splice_end(net::SpliceStop stop, int) noexcept {
  relay_ = nullptr;
  if (!running_ || st_.conn == nullptr) return;
  switch (stop) {
    case net::SpliceStop::kDone:
      pump_response();  // the parser is at the body's end: kMessageEnd, then done
      return;
    case net::SpliceStop::kSourceEof:
    case net::SpliceStop::kSourceError:
      // The backend ended or broke mid-body: the client gets a truncated response and a close.
      worker_.log().log_limited(Level::kWarn, worker_.now_ms(), "backend_response_truncated",
                                "backend=" + st_.pool->backend(st_.backend).id());
      st_.backend_reusable = false;
      attempt_failed(AttemptEnd::kFailed, Reject::kBackendError, 502);
      return;
    case net::SpliceStop::kSinkError:
      st_.backend_reusable = false;
      finish(Outcome::kClientAbort);  // the client went away; the owner closes its side
      return;
    case net::SpliceStop::kSinkFull:
    case net::SpliceStop::kSourceDry:
    case net::SpliceStop::kBudgetUsed:
      return;  // not an end: the relay waits on its own
  }
}

}  // namespace rondel::proxy
