// ClientTls: the TLS client side of one backend connection, without any I/O of its own.
//
// The owner (proxy::BackendConn) feeds it the ciphertext read from the socket, drives the
// handshake, reads plaintext into its own buffers, and writes out the ciphertext that
// accumulates in wire() (handshake messages, encrypted requests, alerts). The backend's
// certificate is verified against the pool's CA and the server name when the pool's `verify` is
// on; a session is taken from the pool's cache before the handshake and kept after it. Loop
// thread only; the pool's ClientContext is held for the connection's life.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <string_view>

#include "rondel/tls/client_context.h"

typedef struct ssl_st SSL;
typedef struct bio_st BIO;

namespace rondel::tls {

class ClientTls {
 public:
  // A connection to backend `backend` (the session cache key) named `server_name` (a DNS name
  // is sent as SNI and verified; an IP address is verified against the certificate's IP
  // addresses). nullptr when OpenSSL has no memory.
  static std::unique_ptr<ClientTls> start(std::shared_ptr<const ClientContext> ctx,
                                          std::string backend, std::string_view server_name);
  ~ClientTls();
  ClientTls(const ClientTls&) = delete;
  ClientTls& operator=(const ClientTls&) = delete;

  const ClientContext* context() const noexcept { return ctx_.get(); }

  enum class Step : uint8_t { kMore, kDone, kFailed };
  // Advances the handshake over what was fed; kFailed sets result(). Output goes to wire().
  Step handshake() noexcept;
  // How the handshake ended (kOk or kResumed once kDone; the reason after kFailed). A failure
  // seen as more-input-wanted at the socket's EOF is the caller's kEof.
  BackendHandshake result() const noexcept { return result_; }
  // OpenSSL's words for a failed verification ("certificate has expired"), else "".
  std::string_view verify_error() const noexcept;

  void feed(const char* p, size_t n) noexcept;  // ciphertext from the backend
  // Decrypts into [dst, dst + cap): > 0 bytes; 0: needs more ciphertext; -1: the stream ended
  // (close_notify) or broke.
  ssize_t read(char* dst, size_t cap) noexcept;
  // Processes what was fed and not read, dropping its plaintext: a connection about to close
  // still keeps the session ticket the backend sent after its last response.
  void drain() noexcept;
  // Fed ciphertext or decrypted plaintext not read yet.
  bool buffered() const noexcept;
  // Encrypts `n` bytes into wire(); false on a TLS error.
  bool write(const char* p, size_t n) noexcept;
  // Ciphertext waiting to be sent; the caller takes it (swap) and writes it out.
  std::string& wire() noexcept { return out_; }

 private:
  ClientTls() = default;
  static int wire_write(BIO* b, const char* data, int len) noexcept;
  static long wire_ctrl(BIO* b, int cmd, long num, void* ptr) noexcept;
  static int on_new_session(SSL* ssl, struct ssl_session_st* s) noexcept;
  friend class ClientContext;

  std::shared_ptr<const ClientContext> ctx_;
  std::string backend_;
  SSL* ssl_ = nullptr;
  BIO* rbio_ = nullptr;  // ciphertext from the backend (memory BIO, owned by ssl_)
  std::string out_;
  BackendHandshake result_ = BackendHandshake::kProtocol;
};

}  // namespace rondel::tls
