"""The request rules HTTP/1.1 and HTTP/2 share (rondel/http/request_rules.h), through the real
daemon with an HTTP/1 and a prior-knowledge HTTP/2 listener in front of echoing backends
(`/_echo` answers with the request head the backend received). Each case is sent over both
protocols and must get the same verdict; what the backend received is read from its echo.

Guards issue 32 items 2, 6, 7 and 8 (all failed on 0676d42):
- the authority: an h2 `host` field that differs from `:authority` is refused (RFC 9113 8.3.1),
  an absolute-form HTTP/1 target's authority replaces the Host field (RFC 9112 3.2.2), and the
  request is routed by that one authority (`hash_key: header:host`);
- userinfo in `:authority` or Host is refused, as in an absolute-form target;
- a fragment in `:path` is refused as in an HTTP/1 target;
- `te: trailers` and `trailer` never reach the HTTP/1.1 backend (hop-by-hop, RFC 9110 7.6.1).
"""
import os
import shutil
import socket
import tempfile
import unittest

from hpack import Decoder, Encoder

from h2_raw import (DATA, END_HEADERS, END_STREAM, HEADERS, PREFACE, RST_STREAM, SETTINGS, frame,
                    read_frames_until)
from harness import (BackendGroup, Rondel, access_records, main, metric_sum, parse_responses,
                     raw_exchange, scrape, wait_until)


def h2_request(port, fields):
    """One HTTP/2 request with exactly `fields` (name, value) on a new connection; returns
    (status, headers dict, body) or (None, {}, b"") when the stream was reset."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        s.sendall(PREFACE + frame(SETTINGS, 0, 0) +
                  frame(HEADERS, END_STREAM | END_HEADERS, 1, Encoder().encode(fields)))
        frames, _ = read_frames_until(
            s, lambda f: f[2] == 1 and (f[0] == RST_STREAM or
                                        (f[0] in (DATA, HEADERS) and f[1] & END_STREAM)),
            limit_s=10)
    finally:
        s.close()
    dec, status, headers, body = Decoder(), None, {}, b""
    for ftype, _, sid, payload in frames:
        if sid != 1:
            continue
        if ftype == HEADERS:
            for n, v in dec.decode(payload):
                if n == ":status":
                    status = int(v)
                else:
                    headers[n] = v
        elif ftype == DATA:
            body += payload
    return status, headers, body


def echoed_fields(body):
    """The (lowercased name, value) fields of the head a backend echoed."""
    out = []
    for line in body.decode("latin-1").split("\r\n")[1:]:
        if not line:
            break
        n, _, v = line.partition(":")
        out.append((n.strip().lower(), v.strip()))
    return out


class RequestRules(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="rondel-it-")
        cls.access_log = os.path.join(cls.dir, "access.log")
        cls.group = BackendGroup([f"b{i}" for i in range(4)])
        members = "\n".join(f"      - {{ address: {m.address} }}" for m in cls.group.members)
        cls.rondel = Rondel(f"""listeners:
  - {{ name: h1, bind: 127.0.0.1:0, pool: p }}
  - {{ name: h2, bind: 127.0.0.1:0, pool: p, http2: prior_knowledge }}
pools:
  - name: p
    hash_key: "header:host"
    backends:
{members}
admin:
  bind: 127.0.0.1:0
log:
  level: info
  access_log: {cls.access_log}
""", workdir=cls.dir)
        cls.h1_port, cls.h2_port = cls.rondel.ports["h1"], cls.rondel.ports["h2"]

    @classmethod
    def tearDownClass(cls):
        code = cls.rondel.stop()
        cls.group.stop()
        shutil.rmtree(cls.dir, ignore_errors=True)
        assert code == 0, code

    def forwarded(self):
        _, samples, _ = scrape(self.rondel.admin_port)
        return metric_sum(samples, "rondel_requests_total")

    def h1(self, raw):
        """(status, headers, body) of one raw HTTP/1.1 request (Connection: close)."""
        responses = parse_responses(raw_exchange(self.h1_port, raw))
        self.assertEqual(len(responses), 1, responses)
        return responses[0]

    def h2(self, path="/_echo", authority="good.example", extra=()):
        fields = [(":method", "GET"), (":scheme", "http"), (":path", path)]
        if authority is not None:
            fields.append((":authority", authority))
        return h2_request(self.h2_port, fields + list(extra))

    def assert_refused(self, status, before):
        self.assertEqual(status, 400)
        self.assertEqual(self.forwarded(), before, "a refused request reached a backend")

    # -- the authority -----------------------------------------------------------------------

    def test_h2_host_that_differs_from_authority_is_refused(self):
        before = self.forwarded()
        status, _, _ = self.h2(path="/_echo?m=mismatch", extra=[("host", "evil.example")])
        self.assert_refused(status, before)
        # Logged as a refused HTTP/1 request is: one access line, rejected, with its stream.
        recs = []
        wait_until(lambda: recs.extend(r for r in access_records(self.access_log)
                                       if r.get("target") == "/_echo?m=mismatch") or recs,
                   timeout=5, what="the access-log line of the refused request")
        self.assertEqual(len(recs), 1, recs)
        self.assertEqual((recs[0]["status"], recs[0]["outcome"], recs[0]["proto"]),
                         ("400", "rejected", "h2"))

    def test_h2_host_equal_to_authority_is_served_with_that_host(self):
        status, _, body = self.h2(extra=[("host", "good.example")])
        self.assertEqual(status, 200)
        self.assertEqual([v for n, v in echoed_fields(body) if n == "host"], ["good.example"])

    def test_h2_authority_alone_becomes_the_host(self):
        status, _, body = self.h2()
        self.assertEqual(status, 200)
        self.assertEqual([v for n, v in echoed_fields(body) if n == "host"], ["good.example"])

    def test_h1_absolute_form_authority_replaces_host_and_routes(self):
        status, headers, body = self.h1(
            b"GET http://good.example/_echo HTTP/1.1\r\nHost: evil.example\r\n"
            b"Connection: close\r\n\r\n")
        self.assertEqual(status, 200)
        self.assertEqual([v for n, v in echoed_fields(body) if n == "host"], ["good.example"])
        # Routed by the one authority: the same backend as a plain request for good.example,
        # over either protocol.
        _, plain, _ = self.h1(b"GET /_echo HTTP/1.1\r\nHost: good.example\r\n"
                              b"Connection: close\r\n\r\n")
        _, over_h2, _ = self.h2()
        self.assertEqual(headers["x-backend"], plain["x-backend"])
        self.assertEqual(over_h2["x-backend"], plain["x-backend"])

    def test_routing_follows_the_authority_not_a_stale_host(self):
        # Some authority whose backend differs from evil.example's: over HTTP/1 the absolute
        # form with Host evil.example must land where the authority's plain requests land.
        _, evil, _ = self.h1(b"GET /_echo HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n")
        for i in range(64):
            name = f"a{i}.example"
            _, plain, _ = self.h1(f"GET /_echo HTTP/1.1\r\nHost: {name}\r\n"
                                  "Connection: close\r\n\r\n".encode())
            if plain["x-backend"] != evil["x-backend"]:
                break
        else:
            self.fail("no authority routes away from evil.example")
        _, absolute, _ = self.h1(f"GET http://{name}/_echo HTTP/1.1\r\nHost: evil.example\r\n"
                                 "Connection: close\r\n\r\n".encode())
        self.assertEqual(absolute["x-backend"], plain["x-backend"])

    # -- userinfo, fragments -----------------------------------------------------------------

    def test_userinfo_is_refused_in_both_protocols(self):
        before = self.forwarded()
        status, _, _ = self.h2(authority="user@evil.example")
        self.assert_refused(status, before)
        status, _, _ = self.h1(b"GET /_echo HTTP/1.1\r\nHost: user@evil.example\r\n"
                               b"Connection: close\r\n\r\n")
        self.assert_refused(status, before)
        status, _, _ = self.h1(b"GET http://user@evil.example/_echo HTTP/1.1\r\n"
                               b"Host: evil.example\r\nConnection: close\r\n\r\n")
        self.assert_refused(status, before)

    def test_fragment_is_refused_in_both_protocols(self):
        before = self.forwarded()
        status, _, _ = self.h2(path="/_echo#frag")
        self.assert_refused(status, before)
        status, _, _ = self.h1(b"GET /_echo#frag HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
        self.assert_refused(status, before)

    def test_empty_authority_is_refused(self):
        # nghttp2 resets the stream itself (PROTOCOL_ERROR, RFC 9113 8.1.1), before the rules.
        before = self.forwarded()
        status, _, _ = self.h2(authority="")
        self.assertIn(status, (400, None))
        self.assertEqual(self.forwarded(), before, "a refused request reached a backend")

    # -- hop-by-hop fields -------------------------------------------------------------------

    def test_te_and_trailer_never_reach_the_backend(self):
        status, _, body = self.h2(extra=[("te", "trailers"), ("trailer", "x-checksum"),
                                         ("x-kept", "1")])
        self.assertEqual(status, 200)
        names = [n for n, _ in echoed_fields(body)]
        self.assertNotIn("te", names)
        self.assertNotIn("trailer", names)
        self.assertIn("x-kept", names)
        status, _, body = self.h1(b"GET /_echo HTTP/1.1\r\nHost: a\r\nTE: trailers\r\n"
                                  b"Trailer: X-Checksum\r\nX-Kept: 1\r\nConnection: close\r\n\r\n")
        self.assertEqual(status, 200)
        names = [n for n, _ in echoed_fields(body)]
        self.assertNotIn("te", names)
        self.assertNotIn("trailer", names)
        self.assertIn("x-kept", names)


if __name__ == "__main__":
    main()
