// The request rules both codecs share (rondel/http/request_rules.h), by known answers: the
// target forms each codec allows, and the one authority a request is routed and forwarded by.
#include <doctest/doctest.h>

#include <string_view>
#include <vector>

#include "rondel/http/request_rules.h"

using namespace rondel::http;

namespace {

std::string_view verdict(std::string_view method, std::string_view target, TargetForms forms) {
  const RuleVerdict v = check_target(method, target, forms);
  return v ? v.reason : "ok";
}

struct Resolved {
  std::string_view reason;  // "ok" when it passes
  std::string_view host;    // head.host
  std::vector<std::string_view> host_fields;
};

Resolved resolve(std::string_view target, std::vector<Header> headers,
                 std::string_view authority = {}, bool has_authority = false) {
  RequestHead head;
  head.target = target;
  const RuleVerdict v = resolve_authority(head, headers, authority, has_authority);
  Resolved r{v ? v.reason : "ok", head.host, {}};
  for (const Header& h : headers) {
    if (iequals(h.name, "host")) r.host_fields.push_back(h.value);
  }
  return r;
}

}  // namespace

TEST_CASE("target forms: HTTP/1 takes absolute-form, HTTP/2's :path does not") {
  for (TargetForms f : {TargetForms::kHttp1, TargetForms::kHttp2}) {
    CHECK(verdict("GET", "/a?b", f) == "ok");
    CHECK(verdict("OPTIONS", "*", f) == "ok");
    CHECK(verdict("GET", "*", f) == "bad_target");
    CHECK(verdict("GET", "/a#b", f) == "fragment_in_target");
    CHECK(verdict("GET", "", f) == "bad_target");
    CHECK(verdict("GET", "a/b", f) == "bad_target");
  }
  CHECK(verdict("GET", "http://a.example/x", TargetForms::kHttp1) == "ok");
  CHECK(verdict("GET", "http://a.example/x", TargetForms::kHttp2) == "bad_target");
  CHECK(verdict("GET", "http://u@a.example/x", TargetForms::kHttp1) == "userinfo_in_target");
  CHECK(verdict("GET", "http://a.example/x#f", TargetForms::kHttp1) == "fragment_in_target");
}

TEST_CASE("authority: an absolute-form target's authority replaces Host (RFC 9112 3.2.2)") {
  Resolved r = resolve("http://good.example:8080/x", {{"Host", "evil.example"}});
  CHECK(r.reason == "ok");
  CHECK(r.host == "good.example:8080");
  CHECK(r.host_fields == std::vector<std::string_view>{"good.example:8080"});
  // HTTP/1.0 without Host: the target still gives the authority.
  r = resolve("http://good.example/x", {});
  CHECK(r.host == "good.example");
  CHECK(resolve("http:///x", {{"Host", "a"}}).reason == "bad_authority");
}

TEST_CASE("authority: :authority wins, a differing host field is malformed (RFC 9113 8.3.1)") {
  CHECK(resolve("/x", {{"host", "evil.example"}}, "good.example", true).reason ==
        "host_authority_mismatch");
  Resolved r = resolve("/x", {{"host", "Good.Example"}}, "good.example", true);
  CHECK(r.reason == "ok");  // host names compare case-insensitively
  CHECK(r.host == "good.example");
  r = resolve("/x", {}, "good.example", true);
  CHECK(r.host == "good.example");
  CHECK(resolve("/x", {}, "user@evil.example", true).reason == "userinfo_in_authority");
  CHECK(resolve("/x", {}, "", true).reason == "bad_authority");
  CHECK(resolve("/x", {}, "a b", true).reason == "bad_authority");
}

TEST_CASE("authority: the Host field alone, checked the same way in both codecs") {
  Resolved r = resolve("/x", {{"Host", "a.example"}});
  CHECK(r.reason == "ok");
  CHECK(r.host == "a.example");
  CHECK(resolve("/x", {{"Host", "u@a"}}).reason == "bad_host");
  CHECK(resolve("/x", {{"Host", "a, b"}}).reason == "bad_host");
  CHECK(resolve("/x", {{"Host", "a"}, {"host", "a"}}).reason == "duplicate_host");
  CHECK(resolve("/x", {}).host.empty());  // no authority at all: the writer's default_host
}
