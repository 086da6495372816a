// ProxyHeaderParser: the PROXY protocol v1/v2 header, one byte at a time (see the header for the
// specification and the bounds).
#include "rondel/net/proxy_protocol.h"

#include <arpa/inet.h>
#include <sys/socket.h>

namespace rondel::net {

namespace {

constexpr std::string_view kV1Signature = "PROXY ";
constexpr uint8_t kV2Signature[12] = {0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D,
                                      0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A};
constexpr uint32_t kV2FixedLength = 16;
constexpr uint32_t kV2Inet = 12;   // 2 x 4 address bytes + 2 x 2 port bytes
constexpr uint32_t kV2Inet6 = 36;  // 2 x 16 + 2 x 2
constexpr uint32_t kV2Unix = 216;  // 2 x 108

constexpr std::string_view kVersionNames[kProxyVersions] = {"v1", "v2"};
constexpr std::string_view kRejectNames[kProxyRejects] = {
    "missing", "malformed", "too_long", "unsupported", "untrusted", "eof", "timeout"};

}  // namespace

std::string_view proxy_version_name(ProxyVersion v) noexcept {
  return kVersionNames[static_cast<size_t>(v)];
}

std::string_view proxy_reject_name(ProxyReject r) noexcept {
  return kRejectNames[static_cast<size_t>(r)];
}

ProxyHeaderParser::Step ProxyHeaderParser::feed(const uint8_t* data, size_t n) noexcept {
  size_t i = 0;
  if (state_ != State::kDone && state_ != State::kInvalid) {
    while (i < n) {
      ++seen_;
      if (!step(data[i++])) break;
    }
  }
  Status st = state_ == State::kDone      ? Status::kDone
              : state_ == State::kInvalid ? Status::kInvalid
                                          : Status::kNeedMore;
  return {st, i};
}

bool ProxyHeaderParser::fail(ProxyReject r) noexcept {
  error_ = r;
  state_ = State::kInvalid;
  return false;
}

bool ProxyHeaderParser::step(uint8_t c) noexcept {
  switch (state_) {
    case State::kSignature:
      if (pos_ == 0 && c == static_cast<uint8_t>(kV1Signature[0])) {
        header_.version = ProxyVersion::kV1;
      } else if (pos_ == 0 && c == kV2Signature[0]) {
        header_.version = ProxyVersion::kV2;
      } else if (pos_ == 0) {
        return fail(ProxyReject::kNotProxy);
      }
      if (header_.version == ProxyVersion::kV1) {
        if (c != static_cast<uint8_t>(kV1Signature[pos_])) return fail(ProxyReject::kNotProxy);
        if (++pos_ == kV1Signature.size()) state_ = State::kV1;
      } else {
        if (c != kV2Signature[pos_]) return fail(ProxyReject::kNotProxy);
        if (++pos_ == sizeof kV2Signature) state_ = State::kV2Fixed;
      }
      return true;
    case State::kV1:
    case State::kV1Lf:
      return v1_byte(c);
    case State::kV2Fixed:
      switch (pos_++) {
        case 12:
          if ((c >> 4) != 2) return fail(ProxyReject::kUnsupported);
          if ((c & 0xF) > 1) return fail(ProxyReject::kUnsupported);
          header_.command = (c & 0xF) == 0 ? ProxyCommand::kLocal : ProxyCommand::kProxy;
          return true;
        case 13: v2_fam_ = c; return true;
        case 14: total_ = static_cast<uint32_t>(c) << 8; return true;
        default:
          total_ = kV2FixedLength + (total_ | c);
          return v2_fixed_end();
      }
    case State::kV2Addr:
      return v2_addr_byte(c);
    case State::kV2Tlv:
      return v2_tlv_byte(c);
    case State::kV2Skip:
      return seen_ == total_ ? v2_payload_end() : true;
    case State::kDone:
    case State::kInvalid:
      return false;
  }
  return false;
}

// --- v1: "PROXY TCP4 1.2.3.4 5.6.7.8 1234 80\r\n" or "PROXY UNKNOWN[ anything]\r\n" -----------

bool ProxyHeaderParser::v1_byte(uint8_t c) noexcept {
  if (seen_ > kMaxV1Length) return fail(ProxyReject::kTooLong);
  if (state_ == State::kV1Lf) return c == '\n' ? v1_finish() : fail(ProxyReject::kMalformed);
  constexpr uint8_t kRest = 5;
  if (c == '\r') {
    if (field_ == kRest) {
      state_ = State::kV1Lf;
      return true;
    }
    if (tok_len_ == 0 || (field_ != 0 && field_ != 4)) return fail(ProxyReject::kMalformed);
    if (field_ == 0 && std::string_view(tok_, tok_len_) != "UNKNOWN") {
      return fail(ProxyReject::kMalformed);
    }
    if (!v1_field_end()) return false;
    state_ = State::kV1Lf;
    return true;
  }
  if (field_ == kRest) return true;  // after UNKNOWN: anything up to CRLF, ignored
  if (c == ' ') {
    if (tok_len_ == 0 || field_ == 4) return fail(ProxyReject::kMalformed);
    return v1_field_end();
  }
  if (c <= 0x20 || c >= 0x7F || tok_len_ + 1u >= sizeof tok_) return fail(ProxyReject::kMalformed);
  tok_[tok_len_++] = static_cast<char>(c);
  return true;
}

// The field in tok_ ended (at a space, or at CR for the last one): checks and stores it.
bool ProxyHeaderParser::v1_field_end() noexcept {
  std::string_view tok(tok_, tok_len_);
  tok_[tok_len_] = '\0';
  tok_len_ = 0;
  switch (field_) {
    case 0:
      if (tok == "TCP4") header_.family = ProxyFamily::kInet;
      else if (tok == "TCP6") header_.family = ProxyFamily::kInet6;
      else if (tok == "UNKNOWN") header_.family = ProxyFamily::kUnspec;
      else return fail(ProxyReject::kMalformed);
      field_ = header_.family == ProxyFamily::kUnspec ? 5 : 1;
      return true;
    case 1:
    case 2: {
      ProxyEndpoint& e = field_ == 1 ? header_.source : header_.destination;
      int af = header_.family == ProxyFamily::kInet ? AF_INET : AF_INET6;
      if (inet_pton(af, tok_, e.addr.data()) != 1) return fail(ProxyReject::kMalformed);
      ++field_;
      return true;
    }
    default: {
      if (tok.size() > 5) return fail(ProxyReject::kMalformed);
      uint32_t v = 0;
      for (char ch : tok) {
        if (ch < '0' || ch > '9') return fail(ProxyReject::kMalformed);
        v = v * 10 + static_cast<uint32_t>(ch - '0');
      }
      if (v > 65535) return fail(ProxyReject::kMalformed);
      (field_ == 3 ? header_.source : header_.destination).port = static_cast<uint16_t>(v);
      ++field_;
      return true;
    }
  }
}

bool ProxyHeaderParser::v1_finish() noexcept {
  header_.command = ProxyCommand::kProxy;
  header_.length = seen_;
  state_ = State::kDone;
  return false;
}

// --- v2: 12-byte signature, version/command, family/transport, length, addresses, TLVs --------

bool ProxyHeaderParser::v2_fixed_end() noexcept {
  if (total_ > kMaxV2Length) return fail(ProxyReject::kTooLong);
  const uint8_t fam = v2_fam_ >> 4, transport = v2_fam_ & 0xF;
  if (fam > 3 || transport > 2) return fail(ProxyReject::kUnsupported);
  static constexpr ProxyFamily kFamilies[] = {ProxyFamily::kUnspec, ProxyFamily::kInet,
                                              ProxyFamily::kInet6, ProxyFamily::kUnix};
  header_.family = kFamilies[fam];
  const uint32_t payload = total_ - kV2FixedLength;
  pos_ = 0;
  state_ = State::kV2Skip;
  if (header_.command == ProxyCommand::kProxy && header_.family != ProxyFamily::kUnspec) {
    static constexpr uint32_t kAddrSize[] = {0, kV2Inet, kV2Inet6, kV2Unix};
    if (payload < kAddrSize[fam]) return fail(ProxyReject::kMalformed);
    if (header_.family != ProxyFamily::kUnix) {
      // A TCP listener relays stream connections only (not UDP).
      if (transport != 1) return fail(ProxyReject::kUnsupported);
      state_ = State::kV2Addr;
    }
  }
  // LOCAL, AF_UNSPEC and AF_UNIX: the payload is skipped (the real addresses are kept).
  return payload == 0 ? v2_payload_end() : true;
}

bool ProxyHeaderParser::v2_addr_byte(uint8_t c) noexcept {
  const uint32_t alen = header_.family == ProxyFamily::kInet ? 4 : 16;
  const uint32_t i = pos_++;
  if (i < alen) {
    header_.source.addr[i] = c;
  } else if (i < 2 * alen) {
    header_.destination.addr[i - alen] = c;
  } else {
    uint16_t& port = i < 2 * alen + 2 ? header_.source.port : header_.destination.port;
    port = static_cast<uint16_t>((port << 8) | c);
  }
  if (pos_ == 2 * alen + 4) state_ = State::kV2Tlv;
  return seen_ == total_ ? v2_payload_end() : true;
}

bool ProxyHeaderParser::v2_tlv_byte(uint8_t c) noexcept {
  if (tlv_head_ < 3) {
    ++tlv_head_;  // byte 1: the type (not interpreted); bytes 2-3: the value's length
    if (tlv_head_ == 2) tlv_left_ = static_cast<uint16_t>(c << 8);
    if (tlv_head_ == 3) tlv_left_ = static_cast<uint16_t>(tlv_left_ | c);
    if (tlv_head_ == 3 && tlv_left_ == 0) tlv_head_ = 0;
  } else if (--tlv_left_ == 0) {
    tlv_head_ = 0;
  }
  return seen_ == total_ ? v2_payload_end() : true;
}

bool ProxyHeaderParser::v2_payload_end() noexcept {
  // TLVs must tile the rest of the payload: none may be cut off by the header's end.
  if (state_ == State::kV2Addr || (state_ == State::kV2Tlv && tlv_head_ != 0)) {
    return fail(ProxyReject::kMalformed);
  }
  header_.length = total_;
  state_ = State::kDone;
  return false;
}

}  // namespace rondel::net
