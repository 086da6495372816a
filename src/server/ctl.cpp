// rondel ctl: builds the PUT/GET request for a backend operation, sends it to the admin
// listener over one blocking connection and prints the answer.
#include "rondel/server/ctl.h"

#include <netdb.h>
#include <sys/time.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>

#include "rondel/config/loader.h"

namespace rondel::server {

namespace {

void ctl_usage(FILE* to) {
  std::fputs(
      "usage: rondel ctl [-f FILE | --admin HOST:PORT] [--token-file PATH] COMMAND POOL ID [N]\n"
      "  drain POOL ID      no new requests; in-flight ones finish; keys go to the next backend\n"
      "  maint POOL ID      out of rotation, active health checks paused\n"
      "  ready POOL ID      back in rotation\n"
      "  weight POOL ID N   set the weight to N (0..65535); 'weight POOL ID config' restores it\n"
      "  show POOL ID       print the backend's state\n"
      "The admin address and token file come from FILE's admin section unless given.\n",
      to);
}

// Percent-encodes a path segment (keeps unreserved characters and ':').
std::string encode_segment(std::string_view s) {
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~' || c == ':') {
      out += static_cast<char>(c);
    } else {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", c);
      out += buf;
    }
  }
  return out;
}

bool read_token(const std::string& path, std::string& token) {
  std::ifstream in(path);
  if (!in) return false;
  std::ostringstream text;
  text << in.rdbuf();
  token = text.str();
  while (!token.empty() && std::isspace(static_cast<unsigned char>(token.back()))) token.pop_back();
  return !token.empty();
}

// One request over a fresh connection; `response` gets everything the server sent.
bool exchange(const std::string& host, const std::string& port, const std::string& request,
              std::string& response, std::string& error) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &res); rc != 0) {
    error = host + ": " + gai_strerror(rc);
    return false;
  }
  int fd = -1;
  for (addrinfo* a = res; a != nullptr && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd >= 0 && connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(res);
  if (fd < 0) {
    error = "cannot connect to " + host + ":" + port + ": " + std::strerror(errno);
    return false;
  }
  timeval tv{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  bool ok = send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
            static_cast<ssize_t>(request.size());
  char buf[4096];
  for (ssize_t n; ok && (n = recv(fd, buf, sizeof buf, 0)) > 0;) {
    response.append(buf, static_cast<size_t>(n));
    if (response.size() > (1u << 20)) break;
  }
  close(fd);
  if (!ok || response.empty()) {
    error = "no answer from " + host + ":" + port;
    return false;
  }
  return true;
}

struct CtlArgs {
  std::string config, admin, token_file;
  std::string command, pool, id, value;
};

// Parses the options and positionals; false on bad usage (reported on stderr).
bool parse_args(int argc, char** argv, CtlArgs& a) {
  std::string* positional[] = {&a.command, &a.pool, &a.id, &a.value};
  size_t n = 0;
  for (int i = 0; i < argc; ++i) {
    std::string_view s = argv[i];
    if ((s == "-f" || s == "--config") && i + 1 < argc) a.config = argv[++i];
    else if (s == "--admin" && i + 1 < argc) a.admin = argv[++i];
    else if (s == "--token-file" && i + 1 < argc) a.token_file = argv[++i];
    else if (!s.empty() && s[0] != '-' && n < 4) *positional[n++] = std::string(s);
    else return false;
  }
  const bool needs_value = a.command == "weight";
  return n == (needs_value ? 4u : 3u);
}

}  // namespace

int run_ctl(int argc, char** argv) {
  if (argc == 1 && (std::strcmp(argv[0], "-h") == 0 || std::strcmp(argv[0], "--help") == 0)) {
    ctl_usage(stdout);
    return 0;
  }
  CtlArgs a;
  if (!parse_args(argc, argv, a)) {
    ctl_usage(stderr);
    return 2;
  }
  std::string body;
  std::string method = "PUT";
  if (a.command == "drain" || a.command == "ready" || a.command == "maint") {
    body = "{\"state\":\"" + a.command + "\"}";
  } else if (a.command == "weight") {
    const bool digits = !a.value.empty() && a.value.size() <= 5 &&
                        a.value.find_first_not_of("0123456789") == std::string::npos;
    if (a.value != "config" && !(digits && std::stoul(a.value) <= 65535)) {
      std::fprintf(stderr, "rondel ctl: weight must be 0..65535 or 'config', got '%s'\n",
                   a.value.c_str());
      return 2;
    }
    body = "{\"weight\":" + (a.value == "config" ? std::string("null") : a.value) + "}";
  } else if (a.command == "show") {
    method = "GET";
  } else {
    ctl_usage(stderr);
    return 2;
  }
  if (!a.config.empty()) {
    config::LoadResult lr = config::load_file(a.config);
    if (!lr.ok()) {
      for (const auto& e : lr.errors) std::fprintf(stderr, "%s\n", e.to_string().c_str());
      return 1;
    }
    if (a.admin.empty() && lr.config.admin.enabled) a.admin = lr.config.admin.bind.to_string();
    if (a.token_file.empty()) a.token_file = lr.config.admin.token_file;
  }
  const size_t colon = a.admin.rfind(':');
  if (a.admin.empty() || colon == std::string::npos) {
    std::fputs("rondel ctl: give --admin HOST:PORT or -f FILE with an admin section\n", stderr);
    return 2;
  }
  std::string host = a.admin.substr(0, colon), port = a.admin.substr(colon + 1);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  std::string token;
  if (method == "PUT" && !a.token_file.empty() && !read_token(a.token_file, token)) {
    std::fprintf(stderr, "rondel ctl: cannot read a token from %s\n", a.token_file.c_str());
    return 1;
  }
  std::string req = method + " /api/pools/" + encode_segment(a.pool) + "/backends/" +
                    encode_segment(a.id) + " HTTP/1.1\r\nHost: " + a.admin + "\r\n";
  if (!token.empty()) req += "Authorization: Bearer " + token + "\r\n";
  if (method == "PUT") {
    req += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
           "\r\n";
  }
  req += "Connection: close\r\n\r\n" + body;
  std::string response, error;
  if (!exchange(host, port, req, response, error)) {
    std::fprintf(stderr, "rondel ctl: %s\n", error.c_str());
    return 1;
  }
  const size_t head_end = response.find("\r\n\r\n");
  const int status = response.size() > 12 ? std::atoi(response.c_str() + 9) : 0;
  const std::string answer = head_end == std::string::npos ? response : response.substr(head_end + 4);
  const bool ok = status >= 200 && status < 300;
  std::fprintf(ok ? stdout : stderr, "%s%s", ok ? "" : ("rondel ctl: HTTP " +
                                                           std::to_string(status) + ": ").c_str(),
               answer.c_str());
  return ok ? 0 : 1;
}

}  // namespace rondel::server
