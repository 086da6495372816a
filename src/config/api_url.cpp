// parse_api_url: the URL of a control-plane API a discovery source talks to.
#include <charconv>
#include <string>

#include "rondel/config/config.h"

namespace rondel::config {

core::Result<ApiUrl> parse_api_url(std::string_view url) {
  ApiUrl ep;
  ep.text = std::string(url);
  auto bad = [](std::string_view why) { return core::fail(std::string(why)); };
  std::string_view rest = url;
  if (rest.starts_with("http://")) {
    rest.remove_prefix(7);
    ep.port = 80;
  } else if (rest.starts_with("https://")) {
    rest.remove_prefix(8);
    ep.tls = true;
    ep.port = 443;
  } else {
    return bad("must start with http:// or https://");
  }
  const size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  if (slash != std::string_view::npos) {
    ep.base_path = std::string(rest.substr(slash));
    while (!ep.base_path.empty() && ep.base_path.back() == '/') ep.base_path.pop_back();
    if (ep.base_path.find_first_of("?# ") != std::string::npos) return bad("no query or fragment");
  }
  std::string_view port;
  if (authority.starts_with("[")) {
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) return bad("unclosed '[' in the host");
    ep.host = std::string(authority.substr(1, close - 1));
    authority.remove_prefix(close + 1);
    if (!authority.empty() && authority[0] != ':') return bad("junk after the IPv6 address");
    if (!authority.empty()) port = authority.substr(1);
  } else {
    const size_t colon = authority.find(':');
    ep.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) port = authority.substr(colon + 1);
  }
  if (ep.host.empty()) return bad("no host");
  if (ep.host.find_first_of("@ ") != std::string::npos) return bad("no user info or spaces");
  if (!port.empty() || authority.ends_with(":")) {
    unsigned v = 0;
    auto r = std::from_chars(port.data(), port.data() + port.size(), v);
    if (r.ec != std::errc() || r.ptr != port.data() + port.size() || v == 0 || v > 65535) {
      return bad("the port must be 1..65535");
    }
    ep.port = static_cast<uint16_t>(v);
  }
  return ep;
}

}  // namespace rondel::config
