// BodySource: a request body as an Exchange pulls it, whatever carries it: the HTTP/1 codec (its
// read buffer, de-chunked by http::RequestParser), later an HTTP/2 stream (DATA frames and flow
// control) or a splice path. The Exchange only sees body bytes; it re-frames them for the backend
// itself. Loop thread only; no call allocates.
//
// The protocol, pull-based so that backpressure needs no extra signal:
//   peek()       the body bytes available now (a view), and whether the body ended or failed;
//   consume(n)   the exchange took the first n bytes of the view (it queued them for the
//                backend). Consumed bytes stay valid and unchanged until the exchange's next
//                want_more(): the exchange calls it only once its writes of them completed;
//   want_more()  the exchange took everything peek() offered and wrote it out: true means more
//                is available already (peek again); false means the source calls the exchange's
//                on_body_available() when more arrives. The source reads (and runs its body
//                timeout) only between want_more() and that call: an exchange that does not
//                consume (the backend is slow) stops the client's reading, and the client is not
//                blamed for the stall.
// A request without a body uses EmptyBody. A source may also offer the rest of a Content-Length
// body, or of a chunked body's current chunk data, as a socket and a byte count
// (body_splice_fd), which the exchange splices to the backend; a chunked body's next chunk-size
// lines are then read and checked by the source (body_splice_next_chunk). The bytes path stays
// the default.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace rondel::proxy {

// Where the body stands after what peek() offered.
enum class BodyState : uint8_t {
  kMore,    // more body may follow (the view may be empty: nothing available now)
  kEnd,     // the view is the last of the body (often empty): the request is whole
  kFailed,  // the body broke its framing or a limit; failure() says how
};

struct BodyView {
  std::string_view bytes;
  BodyState state = BodyState::kMore;
};

// Why a body failed: the status the client should get (400, 413, ...) and a reason for the log.
struct BodyFailure {
  uint16_t status = 400;
  std::string_view why;
};

class BodySource {
 public:
  virtual BodyView peek() noexcept = 0;
  virtual void consume(size_t n) noexcept = 0;
  virtual bool want_more() noexcept = 0;
  // Valid after peek() returned kFailed.
  virtual BodyFailure failure() const noexcept = 0;
  // Instead of want_more(), after peek() offered nothing more: the socket the rest of the body
  // may be read from as it is, with *bytes the body bytes left (at least `min`), when nothing
  // is buffered, the transport is plain TCP and the body is a Content-Length one (*bytes: the
  // rest of it) or a chunked one inside a chunk's data (*bytes: the rest of that chunk's data);
  // else -1. On success the source stops reading until want_more() (a relay that could not
  // start or handed back) or the body's end (peek() after the spliced bytes). Default: -1.
  virtual int body_splice_fd(uint64_t min, uint64_t* bytes) noexcept {
    (void)min;
    (void)bytes;
    return -1;
  }
  // `n` body bytes were taken from that socket by splice: the source counts them as read (its
  // parser, its byte count) and starts its body timeout again.
  virtual void body_spliced(uint64_t n) noexcept { (void)n; }
  // A chunked body whose chunk data so far was all spliced: the source reads what follows from
  // the socket, never past the end of a line (the CRLF after the data, the next chunk-size line),
  // and its parser checks it. kData: the next chunk's data (`bytes`, at least `min`) follows in
  // the socket as it is. kWait: the socket has nothing more now (ask again once readable).
  // kCopy: anything else, for the bytes path (peek(), want_more()) to carry on: a smaller chunk
  // (its line read), the zero-size chunk (the trailer section follows), the client's EOF or an
  // error (a read sees it again), a line too long for this reader, or a malformed line (the
  // parser failed: peek() reports kFailed, and no byte of the line went anywhere).
  struct SpliceChunk {
    enum class Kind : uint8_t { kData, kWait, kCopy };
    Kind kind = Kind::kCopy;
    uint64_t bytes = 0;
  };
  virtual SpliceChunk body_splice_next_chunk(uint64_t min) noexcept {
    (void)min;
    return {};
  }
  // The splice waits for the client's bytes (kClient: the body timeout runs from now) or for the
  // backend to take them (kBackend: the client is not blamed, the body timeout stops).
  enum class SpliceWait : uint8_t { kClient, kBackend };
  virtual void body_splice_wait(SpliceWait on) noexcept { (void)on; }

 protected:
  ~BodySource() = default;
};

// The body of a request that has none: ended from the start. Stateless, so one instance serves
// every exchange of every thread.
class EmptyBody final : public BodySource {
 public:
  BodyView peek() noexcept override { return BodyView{{}, BodyState::kEnd}; }
  void consume(size_t) noexcept override {}
  bool want_more() noexcept override { return false; }
  BodyFailure failure() const noexcept override { return {}; }
  static EmptyBody& instance() noexcept {
    static EmptyBody body;
    return body;
  }
};

}  // namespace rondel::proxy
