"""The battery's cases for HTTP semantics over HTTP/2 (RFC 9113 section 8; h2spec's 8.x numbered
by RFC 7540), for HPACK decoding errors (RFC 7541; h2spec's `hpack` group), and rondel's own
h2->h1 cases (`h2h1/...`): what a request carries to the HTTP/1.1 backend, read back from the
test backend's /_echo (which answers with the request head it received). Registered in
h2spec_core.CASES on import."""

import re

from h2_raw import (DATA, END_HEADERS, END_STREAM, HEADERS, PUSH_PROMISE, fields_block, frame,
                    hpack_int, hpack_string)
from h2_raw import REQUEST_CODES, REQUEST_CODES_LENGTH
from h2spec_core import PASS, Verdict, case, echoed_head
from h2spec_frames import COMPRESSION, PROTOCOL, post

# ---- RFC 9113 8.1 - 8.4 (h2spec 8.1 - 8.2) ------------------------------------------------


@case("8.1/1", "RFC 9113 §8.1", "trailers HEADERS without END_STREAM -> PROTOCOL_ERROR")
def _(c):
    c.send(post(c), frame(DATA, 0, 1, b"test"),
           frame(HEADERS, END_HEADERS, 1, fields_block([("x-trailer", "1")])))
    return c.stream_error(1, PROTOCOL)


def malformed(name, rfc, desc, fields):
    """Registers a case sending a GET with the fields fields(client), expecting a stream error
    PROTOCOL_ERROR."""
    @case(name, rfc, desc + " -> PROTOCOL_ERROR")
    def _(c):
        c.send(frame(HEADERS, END_STREAM | END_HEADERS, 1, fields_block(fields(c))))
        return c.stream_error(1, PROTOCOL)


def common(c, *extra):
    return c.fields() + list(extra)


def without(c, name):
    return [f for f in c.fields() if f[0] != name]


def twice(c, name):
    return c.fields() + [f for f in c.fields() if f[0] == name]


malformed("8.1.2/1", "RFC 9113 §8.2", "field name in uppercase (X-TEST)",
          lambda c: common(c, ("X-TEST", "ok")))
malformed("8.1.2.1/1", "RFC 9113 §8.3", "unknown pseudo-header :test",
          lambda c: common(c, (":test", "ok")))
malformed("8.1.2.1/2", "RFC 9113 §8.3", "response pseudo-header :status in a request",
          lambda c: common(c, (":status", "200")))
malformed("8.1.2.1/4", "RFC 9113 §8.3", "pseudo-header after a regular field",
          lambda c: [f for f in c.fields() if f[0] != ":path"] + [("x-a", "1"),
                                                                    (":path", c.path)])
malformed("8.1.2.2/1", "RFC 9113 §8.2.2", "connection-specific field connection: keep-alive",
          lambda c: common(c, ("connection", "keep-alive")))
malformed("8.1.2.2/2", "RFC 9113 §8.2.2", "te other than trailers (te: trailers, deflate)",
          lambda c: common(c, ("te", "trailers, deflate")))
malformed("8.1.2.3/1", "RFC 9113 §8.3.1", "empty :path",
          lambda c: [(n, "" if n == ":path" else v) for n, v in c.fields()])
malformed("8.1.2.3/2", "RFC 9113 §8.3.1", "no :method", lambda c: without(c, ":method"))
malformed("8.1.2.3/3", "RFC 9113 §8.3.1", "no :scheme", lambda c: without(c, ":scheme"))
malformed("8.1.2.3/4", "RFC 9113 §8.3.1", "no :path", lambda c: without(c, ":path"))
malformed("8.1.2.3/5", "RFC 9113 §8.3.1", "two :method", lambda c: twice(c, ":method"))
malformed("8.1.2.3/6", "RFC 9113 §8.3.1", "two :scheme", lambda c: twice(c, ":scheme"))
malformed("8.1.2.3/7", "RFC 9113 §8.3.1", "two :path", lambda c: twice(c, ":path"))


@case("8.1.2.1/3", "RFC 9113 §8.3", "pseudo-header in trailers -> PROTOCOL_ERROR")
def _(c):
    c.send(post(c), frame(DATA, 0, 1, b"test"),
           frame(HEADERS, END_STREAM | END_HEADERS, 1, fields_block([(":method", "POST")])))
    return c.stream_error(1, PROTOCOL)


@case("8.1.2.6/1", "RFC 9113 §8.1.1", "content-length 1 and 4 octets of DATA -> PROTOCOL_ERROR")
def _(c):
    c.send(c.headers(1, c.block(method="POST", extra=[("content-length", "1")]),
                     end_stream=False), frame(DATA, END_STREAM, 1, b"test"))
    return c.stream_error(1, PROTOCOL)


@case("8.1.2.6/2", "RFC 9113 §8.1.1", "content-length 1 and 8 octets in 2 DATA -> PROTOCOL_ERROR")
def _(c):
    c.send(c.headers(1, c.block(method="POST", extra=[("content-length", "1")]),
                     end_stream=False), frame(DATA, 0, 1, b"test"),
           frame(DATA, END_STREAM, 1, b"test"))
    return c.stream_error(1, PROTOCOL)


@case("8.2/1", "RFC 9113 §8.4", "PUSH_PROMISE from the client -> conn PROTOCOL_ERROR")
def _(c):
    c.send(c.headers(1, end_stream=False),
           frame(PUSH_PROMISE, END_HEADERS, 1, b"\x00\x00\x00\x02" + c.block()))
    return c.connection_error(PROTOCOL)


# ---- RFC 7541 decoding errors (h2spec hpack group) ----------------------------------------

def compression_error(name, rfc, desc, block):
    @case(name, rfc, desc + " -> conn COMPRESSION_ERROR")
    def _(c):
        c.send(c.headers(1, block(c)))
        return c.connection_error(COMPRESSION)


def huffman_bits(text):
    """The Huffman code bits of text (RFC 7541 Appendix B) as a '0'/'1' string."""
    return "".join(format(REQUEST_CODES[b], f"0{REQUEST_CODES_LENGTH[b]}b") for b in text)


def huffman_raw(bits):
    """A Huffman string literal of exactly these bits (zero-filled to whole octets)."""
    bits += "0" * (-len(bits) % 8)
    data = int(bits, 2).to_bytes(len(bits) // 8, "big")
    return hpack_int(len(data), 7, 0x80) + data


def x_test(value_literal):
    """Literal without indexing, new name x-test, and the given value literal."""
    return b"\x00" + hpack_string("x-test", huffman=True) + value_literal


_T = huffman_bits(b"test")  # 20 bits: 4 bits of padding make the octet
compression_error("hpack/2.3.3/1", "RFC 7541 §2.3.3", "indexed field of index 70 (no such entry)",
                  lambda c: c.block() + hpack_int(70, 7, 0x80))
compression_error("hpack/2.3.3/2", "RFC 7541 §2.3.3", "literal whose name index 70 is not there",
                  lambda c: c.block() + hpack_int(70, 6, 0x40) + hpack_string("x"))
compression_error("hpack/4.2/1", "RFC 7541 §4.2", "table size update at the end of the block",
                  lambda c: c.block() + hpack_int(1, 5, 0x20))
compression_error("hpack/5.2/1", "RFC 7541 §5.2", "Huffman padding longer than 7 bits",
                  lambda c: c.block() + x_test(huffman_raw(_T + "1" * 12)))
compression_error("hpack/5.2/2", "RFC 7541 §5.2", "Huffman padding of zeros (not the EOS prefix)",
                  lambda c: c.block() + x_test(huffman_raw(_T + "0000")))
compression_error("hpack/5.2/3", "RFC 7541 §5.2", "Huffman string containing the EOS symbol",
                  lambda c: c.block() + x_test(huffman_raw(
                      huffman_bits(b"tes") + "1" * 30 + huffman_bits(b"t") + "1111")))
compression_error("hpack/6.1/1", "RFC 7541 §6.1", "indexed field of index 0",
                  lambda c: c.block() + b"\x80")
compression_error("hpack/6.3/1", "RFC 7541 §6.3",
                  "table size update over SETTINGS_HEADER_TABLE_SIZE",
                  lambda c: hpack_int(c.server_settings.get(1, 4096) + 1, 5, 0x20) + c.block())


# ---- h2 -> h1: what reaches the HTTP/1.1 backend (issue 32) -------------------------------

def head_fields(head):
    """[(lowercase name, value)] of a raw HTTP/1 request head's field lines."""
    out = []
    for line in head.split("\r\n")[1:]:
        name, _, value = line.partition(":")
        out.append((name.strip().lower(), value.strip()))
    return out


@case("h2h1/8.3.1/1", "RFC 9113 §8.3.1",
      ":authority good.example, host evil.example -> rejected, or Host: good.example forwarded")
def _(c):
    fields = c.fields(path="/_echo")
    fields = [(n, "good.example" if n == ":authority" else v) for n, v in fields]
    c.request(1, fields + [("host", "evil.example")])
    status, body = c.exchange(1)
    if status is None:
        return PASS if refused(body) else body
    if 400 <= status < 500:
        return PASS
    hosts = [v for n, v in head_fields(body.decode("latin-1")) if n == "host"]
    return PASS if hosts == ["good.example"] else \
        Verdict(False, f"backend got Host: {', '.join(hosts) or 'none'}")


def refused(verdict):
    """True when an exchange ended in RST_STREAM or GOAWAY PROTOCOL_ERROR (or the generic
    INTERNAL_ERROR) or the close."""
    return any(code in verdict.actual for code in ("PROTOCOL_ERROR", "INTERNAL_ERROR")) or \
        verdict.actual.startswith("closed")


def rejected_unforwarded(name, rfc, desc, echo_args, leak):
    """A request to /_echo (echo_with(c, **echo_args)) that must be rejected; `leak` is what the
    backend must never see."""
    @case(name, rfc, desc + " -> rejected, not forwarded")
    def _(c):
        c.request(1, echo_with(c, **echo_args))
        status, body = c.exchange(1)
        if status is None:
            return PASS if refused(body) else body
        if 400 <= status < 500:
            return PASS
        seen = [line for line in body.decode("latin-1").split("\r\n") if leak in line]
        return Verdict(False, f"answered {status}" +
                       (f", backend got {seen[0]!r}" if seen else ""))


def echo_with(c, extra=(), authority=None, path="/_echo", method="GET"):
    """A request's fields for the test backend's /_echo, with `extra` fields at the end."""
    return [(n, (authority or v) if n == ":authority" else v)
            for n, v in c.fields(method=method, path=path)] + list(extra)


# (name, RFC, what is sent, echo_with's arguments, what the backend must never see)
REJECTED = [
    ("h2h1/8.3.1/2", "RFC 9113 §8.3.1", ":authority with userinfo user@evil.example",
     dict(authority="user@evil.example"), "user@"),
    ("h2h1/8.3.1/3", "RFC 9113 §8.3.1, 9110 §7.1", ":path with a fragment (/_echo?q#frag)",
     dict(path="/_echo?q#frag"), "#frag"),
    ("h2h1/8.2.1/1", "RFC 9113 §8.2.1", "field value with CR LF",
     dict(extra=[("x-a", "b\r\nx-injected: 1")]), "x-injected"),
    ("h2h1/8.2.1/2", "RFC 9113 §8.2.1", "field value with NUL",
     dict(extra=[("x-a", "b\x00c")]), "\x00"),
    ("h2h1/8.2.1/3", "RFC 9113 §8.2.1", "field name with a space (x a)",
     dict(extra=[("x a", "b")]), "x a:"),
    ("h2h1/8.2.1/4", "RFC 9113 §8.2.1", "field value with leading whitespace",
     dict(extra=[("x-a", " b")]), "x-a:  b"),
    ("h2h1/8.2.2/1", "RFC 9113 §8.2.2", "transfer-encoding: chunked",
     dict(extra=[("transfer-encoding", "chunked")]), "chunked"),
    ("h2h1/8.2.2/2", "RFC 9113 §8.2.2", "upgrade: websocket",
     dict(extra=[("upgrade", "websocket")]), "websocket"),
    ("h2h1/8.1.1/1", "RFC 9113 §8.1.1", "two different content-length values",
     dict(method="POST", extra=[("content-length", "0"), ("content-length", "5")]),
     "content-length"),
    ("h2h1/8.5/1", "RFC 9113 §8.5", "CONNECT with :scheme and :path", dict(method="CONNECT"),
     "CONNECT"),
]
for _row in REJECTED:
    rejected_unforwarded(*_row)


@case("h2h1/8.2.2/3", "RFC 9110 §10.1.4",
      "te: trailers -> not forwarded to HTTP/1.1, or with Connection: te (hop-by-hop)")
def _(c):
    head, err = echoed_head(c, 1, echo_with(c, [("te", "trailers")]))
    if err:
        return err
    te = [v for n, v in head_fields(head) if n == "te"]
    connection = ",".join(v.lower() for n, v in head_fields(head) if n == "connection")
    if not te or re.search(r"\bte\b", connection):
        return PASS
    return Verdict(False, f"backend got te: {te[0]} (Connection: {connection or 'none'})")


@case("h2h1/8.2.2/4", "issue 32 item 8",
      "trailer: x-sum -> not forwarded (rondel drops request trailers; HTTP/1 strips it too)")
def _(c):
    head, err = echoed_head(c, 1, echo_with(c, [("trailer", "x-sum")]))
    if err:
        return err
    trailer = [v for n, v in head_fields(head) if n == "trailer"]
    return Verdict(False, f"backend got trailer: {trailer[0]}") if trailer else PASS
