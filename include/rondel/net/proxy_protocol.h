// ProxyHeaderParser: an incremental, allocation-free parser of the PROXY protocol header (v1
// text and v2 binary) that an L4 balancer (HAProxy, AWS NLB, ...) sends before the client's
// bytes, plus the per-listener counters of the header stage.
//
// Specification: HAProxy's "The PROXY protocol, versions 1 & 2" (doc/proxy-protocol.txt, 2020).
// Bounds: a v1 line is at most 107 bytes including CRLF (the specification's own bound); a v2
// header at most 16 + 2048 bytes. The specification lets a v2 header reach 16 + 65535 bytes and
// HAProxy bounds it by its buffer (tune.bufsize, 16384 by default); rondel skips TLVs without
// buffering them, so the bound only limits how long a sender may keep a connection in the
// header stage; 2048 bytes hold every TLV set that AWS, GCP, Azure and HAProxy's
// send-proxy-v2-ssl send (tens to a few hundred bytes). TLVs are checked for framing (each TLV
// fits the header), not interpreted; a CRC32C TLV is not verified.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace rondel::net {

enum class ProxyVersion : uint8_t { kV1, kV2 };
inline constexpr size_t kProxyVersions = 2;
std::string_view proxy_version_name(ProxyVersion v) noexcept;  // "v1", "v2"

// LOCAL (v2 only: a health check from the balancer itself) or PROXY (a relayed connection).
enum class ProxyCommand : uint8_t { kLocal, kProxy };

// The address family the header declares. kUnspec: v1 "UNKNOWN" or v2 AF_UNSPEC; kUnix: v2
// AF_UNIX (addresses skipped). Only kInet and kInet6 carry addresses rondel uses.
enum class ProxyFamily : uint8_t { kUnspec, kInet, kInet6, kUnix };

// One endpoint the header carries: the address in network byte order (IPv4: the first 4
// bytes) and the port in host order.
struct ProxyEndpoint {
  std::array<uint8_t, 16> addr{};
  uint16_t port = 0;
};

struct ProxyHeader {
  ProxyVersion version = ProxyVersion::kV1;
  ProxyCommand command = ProxyCommand::kProxy;
  ProxyFamily family = ProxyFamily::kUnspec;
  ProxyEndpoint source, destination;
  uint32_t length = 0;  // bytes of the whole header (v1 line with CRLF; v2 16 + payload)

  // Whether the connection's addresses are to be replaced by source/destination: a PROXY
  // command with an IPv4 or IPv6 family. Otherwise (LOCAL, UNKNOWN, AF_UNSPEC, AF_UNIX) the
  // specification says to keep the connection's real addresses.
  bool carries_address() const noexcept {
    return command == ProxyCommand::kProxy &&
           (family == ProxyFamily::kInet || family == ProxyFamily::kInet6);
  }
};

// Why a header was refused, by the parser (kNotProxy .. kUnsupported) or by the transport's
// header stage (the rest). The order is the metric label order; names: proxy_reject_name().
enum class ProxyReject : uint8_t {
  kNotProxy,     // "missing": the first bytes are no PROXY signature (e.g. plain HTTP)
  kMalformed,    // a field or separator is wrong (bad address, port, TLV framing, ...)
  kTooLong,      // past the bound above (v1 without CRLF in 107 bytes, v2 length too large)
  kUnsupported,  // a v2 version, command, family or transport rondel does not take
  kUntrusted,    // the connection's source is in no `trusted` network (closed at accept)
  kEof,          // the connection closed or failed before the header was whole
  kTimeout,      // the header was not whole within the listener's header_timeout
  kCount
};
inline constexpr size_t kProxyRejects = static_cast<size_t>(ProxyReject::kCount);
std::string_view proxy_reject_name(ProxyReject r) noexcept;

// The header stage's counters of one listener, shared by its workers (relaxed atomics); one
// owner: the listener's state, which the header stage of each connection points to.
struct ProxyProtocolCounters {
  std::array<std::atomic<uint64_t>, kProxyRejects> rejects{};
  std::array<std::atomic<uint64_t>, kProxyVersions> headers{};  // accepted, by version
};

class ProxyHeaderParser {
 public:
  static constexpr uint32_t kMaxV1Length = 107;
  static constexpr uint32_t kMaxV2Payload = 2048;
  static constexpr uint32_t kMaxV2Length = 16 + kMaxV2Payload;

  enum class Status : uint8_t { kNeedMore, kDone, kInvalid };
  struct Step {
    Status status;
    size_t consumed;  // bytes of this piece that belong to the header (all of it on kNeedMore)
  };

  // Feeds the next `n` bytes of the connection (any split: one byte at a time works). kDone:
  // header() is complete and the bytes after `consumed` are the client's own; kInvalid: error()
  // says why. Once kDone or kInvalid, further calls return the same status consuming nothing.
  // No allocation; O(n).
  Step feed(const uint8_t* data, size_t n) noexcept;

  const ProxyHeader& header() const noexcept { return header_; }
  ProxyReject error() const noexcept { return error_; }
  // Bytes consumed so far (0: nothing seen yet).
  uint32_t seen() const noexcept { return seen_; }

 private:
  enum class State : uint8_t { kSignature, kV1, kV1Lf, kV2Fixed, kV2Addr, kV2Tlv, kV2Skip,
                               kDone, kInvalid };
  bool step(uint8_t c) noexcept;  // false: stop (done or invalid)
  bool v1_byte(uint8_t c) noexcept;
  bool v1_field_end() noexcept;
  bool v1_finish() noexcept;
  bool v2_fixed_end() noexcept;
  bool v2_addr_byte(uint8_t c) noexcept;
  bool v2_tlv_byte(uint8_t c) noexcept;
  bool v2_payload_end() noexcept;
  bool fail(ProxyReject r) noexcept;

  ProxyHeader header_;
  State state_ = State::kSignature;
  ProxyReject error_ = ProxyReject::kNotProxy;
  uint32_t seen_ = 0;   // header bytes consumed
  uint32_t pos_ = 0;    // position within the current part (signature, v2 fixed, addresses)
  uint32_t total_ = 0;  // v2: 16 + payload length
  uint16_t tlv_left_ = 0;  // v2: bytes left of the current TLV's value
  uint8_t tlv_head_ = 0;   // v2: bytes seen of the current TLV's 3-byte type+length
  uint8_t field_ = 0;      // v1: 0 protocol, 1 source, 2 destination, 3 sport, 4 dport, 5 rest
  uint8_t tok_len_ = 0;    // v1: bytes in tok_
  uint8_t v2_fam_ = 0;     // v2: byte 13 (family and transport)
  char tok_[46] = {};      // v1: the current field (an IPv6 address fits)
};

}  // namespace rondel::net
