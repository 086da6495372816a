// ResponseSink: where an exchange streams the backend's response. The client codec implements it
// (HTTP/1 framing now; an HTTP/2 stream later), so the exchange's response side never writes
// client framing itself. Loop thread only; no call allocates.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "rondel/http/message.h"

namespace rondel::proxy {

// Bytes before every body piece passed to ResponseSink::sink_body that the sink may overwrite:
// the backend connection's reads start this far into its buffer, and what lies before a piece
// in it is consumed (framing, the head, body bytes already given). An HTTP/2 sink writes a DATA
// frame's header there, so header and payload leave as one piece without a copy.
inline constexpr size_t kBodyHeadroom = 16;
// Reads into a large backend buffer stop at a multiple of this many bytes past the headroom: the
// payload of one HTTP/2 DATA frame that, with its 9-byte header, fills one TLS record (16,384
// bytes of plaintext). So a full read leaves as whole frames and records, not as four and a short
// fifth one (a record and a socket write of its own) at the end of every read.
inline constexpr size_t kBodyPieceGrain = 16384 - 9;

class ResponseSink {
 public:
  // What became of a 1xx response offered to the sink.
  enum class Interim : uint8_t {
    kQueued,   // queued for the client
    kSkipped,  // this client gets none (HTTP/1.0, or the 100 Continue was already sent)
    kBusy,     // a write is pending: nothing was queued
  };
  virtual Interim sink_interim(const http::ResponseHead& head) noexcept = 0;
  // Queues the final response head; the codec chooses the client framing for it.
  virtual void sink_head(const http::ResponseHead& head) noexcept = 0;
  // Queues one body piece, writing when the queue is full. False: a write is pending (or failed);
  // stop until the sink drains. `body` points into the backend connection's read buffer, with
  // kBodyHeadroom bytes before it the sink may overwrite; it stays where it is and unchanged
  // until the exchange reads the backend again, which it does only once sink_busy() is false (or
  // the exchange ends: on_exchange_done). So a sink may keep a view of the piece instead of
  // copying it, and report busy until it has sent the bytes.
  virtual bool sink_body(std::string_view body) noexcept = 0;
  // Queues the end of the body (the codec's framing of it).
  virtual void sink_end() noexcept = 0;
  // Queues rondel's own response with `status` (502, 503, 504, 408, ...) instead of a backend's,
  // replacing anything queued and not yet written. Called only while no final response started
  // and no write is pending; the exchange ends right after (the owner writes it out).
  virtual void sink_local(uint16_t status) noexcept = 0;
  // Writes what is queued: true when all of it went out, false when a write is pending (the
  // codec resumes the exchange once it drains) or the client is gone.
  virtual bool sink_flush() noexcept = 0;
  // A write to the client is pending (backpressure: stop reading the backend).
  virtual bool sink_busy() const noexcept = 0;
  // The socket the rest of the current body may be spliced to (nothing is queued or pending, the
  // transport is plain TCP, and the client framing is the backend's `framing`: Content-Length,
  // whose bytes go as they are, or chunked, whose chunk data go as they are after a chunk-size
  // line the exchange writes), or -1: the codec must see the bytes (reframing, TLS, HTTP/2).
  // Default: -1.
  virtual int sink_splice_fd(http::Framing framing) noexcept {
    (void)framing;
    return -1;
  }
  // Whether a body of `framing` can be spliced to this client at all (plain TCP, the client
  // framing the backend's), whatever is queued now: the exchange then reads such a body with a
  // small buffer between splices. Default: false.
  virtual bool sink_splices(http::Framing framing) const noexcept {
    (void)framing;
    return false;
  }
  // `bytes` went to the client by splice, or as the chunk framing around spliced data (for the
  // byte counters).
  virtual void sink_spliced(uint64_t bytes) noexcept { (void)bytes; }

 protected:
  ~ResponseSink() = default;
};

}  // namespace rondel::proxy
