// Connection serves one accepted client connection: it parses requests with llhttp as they
// stream in (bodies are counted, never buffered), queues one Response per request and writes
// the responses in request order once each one's delay has passed.
#pragma once

#include <llhttp.h>
#include <uv.h>

#include <cstdint>
#include <string>
#include <vector>

#include "request_target.h"
#include "response.h"

namespace rondel::test_backend {

class Backend;

class Connection {
 public:
  // Accepts a pending connection on `server` and starts reading. The Connection owns itself: it
  // frees itself once both of its handles have been closed.
  static void accept(Backend& backend, uv_stream_t* server) noexcept;

  // Closes the connection now (RST instead of FIN if `reset`); pending responses are dropped.
  // Idempotent; the object is freed later, from the last close callback.
  void close(bool reset) noexcept;

  // Intrusive links of Backend's connection list.
  Connection* prev_ = nullptr;
  Connection* next_ = nullptr;

 private:
  explicit Connection(Backend& backend) noexcept;
  ~Connection() = default;

  // Reading and parsing.
  void feed(const char* data, size_t len) noexcept;
  void on_eof() noexcept;
  void start_request() noexcept;
  void finish_request() noexcept;
  void abort_request() noexcept;
  void reject(std::string_view reason) noexcept;
  // Applies the request's Range to `r` (206 slice, 416, or the whole body) and looks the body up
  // in the cache model; returns the extra delay of a miss.
  uint64_t serve_range(Response& r);
  void update_reading() noexcept;
  size_t pending_count() const noexcept { return pending_.size() - front_; }
  void pop_response() noexcept;
  void save_head(const char* from, const char* to) noexcept;

  // Writing.
  // Serialises ready responses and writes them; called after reads, writes and timers.
  void pump() noexcept;
  // Serialises ready responses into fill_ up to the high-water mark; true if it got there.
  bool serialise() noexcept;
  void flush() noexcept;
  void maybe_finish() noexcept;
  void begin_shutdown() noexcept;

  // libuv callbacks.
  static void on_alloc(uv_handle_t* handle, size_t suggested, uv_buf_t* buf) noexcept;
  static void on_read(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf) noexcept;
  static void on_write(uv_write_t* req, int status) noexcept;
  static void on_shutdown(uv_shutdown_t* req, int status) noexcept;
  static void on_timer(uv_timer_t* timer) noexcept;
  static void on_linger(uv_timer_t* timer) noexcept;
  static void on_close(uv_handle_t* handle) noexcept;

  // llhttp callbacks.
  static int on_message_begin(llhttp_t* p) noexcept;
  static int on_method(llhttp_t* p, const char* at, size_t len) noexcept;
  static int on_url(llhttp_t* p, const char* at, size_t len) noexcept;
  static int on_url_complete(llhttp_t* p) noexcept;
  static int on_header_field(llhttp_t* p, const char* at, size_t len) noexcept;
  static int on_header_field_complete(llhttp_t* p) noexcept;
  static int on_header_value(llhttp_t* p, const char* at, size_t len) noexcept;
  static int on_header_value_complete(llhttp_t* p) noexcept;
  static int on_headers_complete(llhttp_t* p) noexcept;
  static int on_body(llhttp_t* p, const char* at, size_t len) noexcept;
  static int on_message_complete(llhttp_t* p) noexcept;
  static const llhttp_settings_t kParserSettings;

  enum class HeaderKind : uint8_t { kOther, kRequestId, kExpect, kRange };

  Backend& backend_;
  uv_tcp_t tcp_{};
  uv_timer_t timer_{};
  uv_write_t write_req_{};
  uv_shutdown_t shutdown_req_{};
  llhttp_t parser_{};
  int open_handles_ = 0;

  // The request being parsed. Strings are reused from request to request.
  std::string target_;
  std::string header_name_;
  std::string request_id_;
  std::string expect_;
  std::string range_;            // Range header value.
  std::string head_;             // Raw request head, for /_echo.
  const char* head_start_ = nullptr;  // Where the unsaved part of the head starts in the read.
  RequestTarget parsed_;
  HeaderKind header_kind_ = HeaderKind::kOther;
  uint64_t body_bytes_ = 0;
  uint32_t body_crc_ = 0;
  bool in_request_ = false;      // Between message begin and message complete.
  bool in_head_ = false;         // Between message begin and headers complete.
  bool head_paused_ = false;     // Parser paused at the end of the head.
  bool counted_ = false;         // The request was counted in Stats (and in in_flight).
  bool checksum_ = false;

  // Responses in request order: pending_[front_..] (a vector reused as a queue, so queueing a
  // response does not allocate once warm), and the two output buffers (one being written by
  // libuv, one filling).
  std::vector<Response> pending_;
  size_t front_ = 0;
  std::string fill_;
  std::string out_;
  bool writing_ = false;
  bool reading_ = false;
  bool closing_ = false;
  bool stop_parsing_ = false;    // No further requests are accepted on this connection.
  bool finishing_ = false;       // Close once the output has been flushed.
  bool shutting_down_ = false;
  bool peer_eof_ = false;
};

}  // namespace rondel::test_backend
