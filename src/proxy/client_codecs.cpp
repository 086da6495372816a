// The codec table: which protocol a client connection speaks, and the codec made for it. A new
// protocol is one codec (a ClientCodec) and one row here.
#include <array>
#include <new>

#include "rondel/proxy/client_connection.h"
#include "rondel/proxy/http1_session.h"
#include "rondel/proxy/http2_session.h"

namespace rondel::proxy {

namespace {

// One row: a negotiated ALPN protocol id, or (empty) cleartext with the listener's http2 mode.
struct CodecRow {
  std::string_view alpn;
  config::Http2Mode cleartext_mode;
  ClientProtocol protocol;
};

constexpr std::array kCodecTable{
    CodecRow{"h2", config::Http2Mode::kOff, ClientProtocol::kHttp2},  // TLS, ALPN h2
    CodecRow{"", config::Http2Mode::kPriorKnowledge, ClientProtocol::kHttp2},  // h2c listener
};

template <class Codec>
ClientCodec* make(ClientConnection& c) noexcept {
  return new (std::nothrow) Codec(c);
}

// Indexed by ClientProtocol.
constexpr ClientCodec* (*kFactories[])(ClientConnection&) noexcept = {&make<Http1Session>,
                                                                     &make<Http2Session>};

}  // namespace

ClientProtocol choose_client_protocol(const config::ListenerConfig* l, std::string_view alpn) {
  for (const CodecRow& r : kCodecTable) {
    if (!alpn.empty() ? alpn == r.alpn
                      : r.alpn.empty() && l != nullptr && l->http2 == r.cleartext_mode) {
      return r.protocol;
    }
  }
  return ClientProtocol::kHttp1;  // any other ALPN ("http/1.1"), none, or a plain listener
}

ClientCodec* make_client_codec(ClientProtocol p, ClientConnection& c) noexcept {
  return kFactories[static_cast<size_t>(p)](c);
}

}  // namespace rondel::proxy
