// format_access: the text line operators and tests parse, and the JSON line (escaping, nulls).
#include <doctest/doctest.h>

#include <string>

#include "rondel/proxy/log.h"

using rondel::proxy::AccessFormat;
using rondel::proxy::AccessRecord;
using rondel::proxy::format_access;

namespace {

AccessRecord sample() {
  AccessRecord r;
  r.client = "127.0.0.1";
  r.method = "GET";
  r.target = "/a\"b\\c\x01";
  r.status = 200;
  r.bytes_in = 40;
  r.bytes_out = 1234;
  r.pool = "cache";
  r.backend = "10.0.0.2:80";
  r.owner = "10.0.0.1:80";
  r.hops = 1;
  r.attempts = 1;
  r.duration_us = 517;
  r.outcome = "ok";
  r.worker = 3;
  return r;
}

}  // namespace

TEST_CASE("text access line keeps its key=value shape and field order") {
  AccessRecord r = sample();
  r.target = "/k";
  std::string out;
  format_access(r, AccessFormat::kText, out);
  CHECK(out ==
        "access client=127.0.0.1 method=GET target=/k status=200 bytes_in=40 bytes_out=1234 "
        "pool=cache backend=10.0.0.2:80 owner=10.0.0.1:80 hops=1 attempts=1 duration_us=517 "
        "outcome=ok worker=3\n");
}

TEST_CASE("json access line escapes the target and writes absent fields as null") {
  AccessRecord r = sample();
  std::string out;
  format_access(r, AccessFormat::kJson, out);
  CHECK(out ==
        "{\"client\":\"127.0.0.1\",\"method\":\"GET\",\"target\":\"/a\\\"b\\\\c\\u0001\","
        "\"status\":200,\"bytes_in\":40,\"bytes_out\":1234,\"pool\":\"cache\","
        "\"backend\":\"10.0.0.2:80\",\"owner\":\"10.0.0.1:80\",\"hops\":1,\"attempts\":1,"
        "\"duration_us\":517,\"outcome\":\"ok\",\"worker\":3}\n");
  AccessRecord refused;  // refused before the head was read: no method, target, backend, owner
  refused.client = "::1";
  refused.pool = "cache";
  refused.status = 400;
  refused.outcome = "rejected";
  format_access(refused, AccessFormat::kJson, out);
  CHECK(out.find("\"method\":null,\"target\":null") != std::string::npos);
  CHECK(out.find("\"backend\":null,\"owner\":null") != std::string::npos);
}

TEST_CASE("format_access reuses the line's capacity") {
  AccessRecord r = sample();
  std::string out;
  format_access(r, AccessFormat::kJson, out);
  const char* data = out.data();
  const size_t cap = out.capacity();
  for (int i = 0; i < 100; ++i) format_access(r, AccessFormat::kJson, out);
  CHECK(out.data() == data);
  CHECK(out.capacity() == cap);
}
