"""The battery's `generic` cases (h2spec's generic group, rewritten): what a server MUST accept,
frame by frame (RFC 9113 sections 3-6), request by request (section 8) and representation by
representation (RFC 7541 section 6). Each one ends with rondel answering. Registered in
h2spec_core.CASES on import."""

from h2_raw import (DATA, END_HEADERS, END_STREAM, GOAWAY, HEADERS, PADDED, PING, PRIORITY,
                    PRIORITY_FLAG, RST_STREAM, SETTINGS, WINDOW_UPDATE, CONTINUATION,
                    INITIAL_WINDOW_SIZE, fields_block, frame, hpack_int, hpack_string, settings)
from h2spec_core import PASS, Verdict, answered, case, ping_then, sends
from h2spec_frames import DUMMY, U32, post, priority


def ping_or_close(c, data=b"generic!"):
    """After a frame that may end the exchange: a PING ack, or the connection closed."""
    c.send(frame(PING, 0, 0, data))
    return c.wait(lambda ev: ev == "closed" if isinstance(ev, str)
                  else (ev[1] & 1 and ev[3] == data) if ev[0] == PING
                  else (U32.unpack(ev[3][4:8])[0] == 0) if ev[0] == GOAWAY else None)


@case("generic/1/1", "RFC 9113 §3.4", "client preface -> accepted (SETTINGS exchanged)",
      handshake=False)
def _(c):
    return PASS if c.handshake() else Verdict(False, "no SETTINGS exchange")


sends("generic/2/1", "RFC 9113 §5.1", "PRIORITY on an idle stream -> accepted, PING ack",
      lambda c: [frame(PRIORITY, 0, 1, priority())], ping_then)


@case("generic/2/2", "RFC 9113 §5.1", "WINDOW_UPDATE on a half-closed (remote) stream -> DATA")
def _(c):
    c.send(c.headers(1), frame(WINDOW_UPDATE, 0, 1, U32.pack(100)))
    return c.data_frame(1)


@case("generic/2/3", "RFC 9113 §5.1", "PRIORITY on a half-closed (remote) stream -> DATA")
def _(c):
    c.send(c.headers(1), frame(PRIORITY, 0, 1, priority()))
    return c.data_frame(1)


@case("generic/2/4", "RFC 9113 §5.1", "RST_STREAM on a half-closed (remote) stream -> accepted")
def _(c):
    c.send(c.headers(1), frame(RST_STREAM, 0, 1, U32.pack(8)))
    return ping_or_close(c)


@case("generic/2/5", "RFC 9113 §5.1", "PRIORITY on a closed stream -> accepted, PING ack")
def _(c):
    c.send(c.headers(1))
    v = c.stream_end(1)
    if not v.ok:
        return Verdict(False, f"stream 1 did not end: {v.actual}")
    c.send(frame(PRIORITY, 0, 1, priority()))
    return ping_then(c)


sends("generic/3.1/1", "RFC 9113 §6.1", "POST with one DATA frame -> response HEADERS",
      lambda c: [post(c), frame(DATA, END_STREAM, 1, b"test")], answered(1))
sends("generic/3.1/2", "RFC 9113 §6.1", "POST with two DATA frames -> response HEADERS",
      lambda c: [post(c), frame(DATA, 0, 1, b"test"), frame(DATA, END_STREAM, 1, b"test")],
      answered(1))
sends("generic/3.1/3", "RFC 9113 §6.1", "DATA with padding -> response HEADERS",
      lambda c: [post(c), frame(DATA, PADDED | END_STREAM, 1, b"\x08test" + bytes(8))], answered(1))
sends("generic/3.2/1", "RFC 9113 §6.2", "HEADERS -> response HEADERS",
      lambda c: [c.headers(1)], answered(1))
sends("generic/3.2/2", "RFC 9113 §6.2", "HEADERS with padding -> response HEADERS",
      lambda c: [frame(HEADERS, PADDED | END_STREAM | END_HEADERS, 1,
                       b"\x08" + c.block() + bytes(8))],
      answered(1))
sends("generic/3.2/3", "RFC 9113 §6.2", "HEADERS with priority -> response HEADERS",
      lambda c: [frame(HEADERS, PRIORITY_FLAG | END_STREAM | END_HEADERS, 1,
                       priority(weight=255) + c.block())],
      answered(1))


for _i, (_what, _pri) in enumerate([("weight 1", priority(weight=0)),
                                    ("weight 256", priority(weight=255)),
                                    ("a dependency on stream 0", priority(parent=0)),
                                    ("the exclusive flag", priority(exclusive=True))]):
    @case(f"generic/3.3/{_i + 1}", "RFC 9113 §6.3", f"PRIORITY with {_what} -> accepted")
    def _(c, pri=_pri):
        c.send(frame(PRIORITY, 0, 1, pri), c.headers(1))
        return c.response_headers(1)


sends("generic/3.3/5", "RFC 9113 §5.1.1", "PRIORITY on idle stream 5, then HEADERS on 3 -> served",
      lambda c: [frame(PRIORITY, 0, 5, priority()), c.headers(3)], answered(3))


@case("generic/3.4/1", "RFC 9113 §6.4", "RST_STREAM on an open stream -> accepted")
def _(c):
    c.send(post(c), frame(RST_STREAM, 0, 1, U32.pack(8)))
    return ping_or_close(c)


@case("generic/3.5/1", "RFC 9113 §6.5", "SETTINGS -> SETTINGS with ACK")
def _(c):
    c.send(frame(SETTINGS, 0, 0, settings((INITIAL_WINDOW_SIZE, 65535))))
    return c.settings_ack()


@case("generic/3.7/1", "RFC 9113 §6.7", "PING -> PING ack")
def _(c):
    return ping_then(c)


@case("generic/3.8/1", "RFC 9113 §6.8", "GOAWAY -> accepted")
def _(c):
    c.send(frame(GOAWAY, 0, 0, U32.pack(0) + U32.pack(0)))
    return ping_or_close(c)


sends("generic/3.9/1", "RFC 9113 §6.9", "WINDOW_UPDATE on stream 0 -> accepted, PING ack",
      lambda c: [frame(WINDOW_UPDATE, 0, 0, U32.pack(1))], ping_then)
sends("generic/3.9/2", "RFC 9113 §6.9", "WINDOW_UPDATE on stream 1 -> response HEADERS",
      lambda c: [post(c), frame(WINDOW_UPDATE, 0, 1, U32.pack(1)),
                 frame(DATA, END_STREAM, 1, b"x")], answered(1))
sends("generic/3.10/1", "RFC 9113 §6.10", "HEADERS and a CONTINUATION -> response HEADERS",
      lambda c: [c.headers(1, end_headers=False), frame(CONTINUATION, END_HEADERS, 1, DUMMY)],
      answered(1))
sends("generic/3.10/2", "RFC 9113 §6.10", "HEADERS and 3 CONTINUATIONs -> response HEADERS",
      lambda c: [c.headers(1, end_headers=False), frame(CONTINUATION, 0, 1, DUMMY),
                 frame(CONTINUATION, 0, 1, DUMMY), frame(CONTINUATION, END_HEADERS, 1, DUMMY)],
      answered(1))


def exchange_status(c, sid, want=200):
    status, body = c.exchange(sid)
    if status is None:
        return body
    return PASS if status == want else Verdict(False, f"answered {status}")


@case("generic/4/1", "RFC 9113 §8.1", "GET -> 200 and the whole body")
def _(c):
    c.send(c.headers(1))
    return exchange_status(c, 1)


@case("generic/4/2", "RFC 9113 §8.1", "HEAD -> 200, no body")
def _(c):
    c.send(c.headers(1, c.block(method="HEAD")))
    status, body = c.exchange(1)
    if status is None:
        return body
    return PASS if (status, body) == (200, b"") else Verdict(False, f"{status}, {len(body)} bytes")


@case("generic/4/3", "RFC 9113 §8.1", "POST with a body -> 200")
def _(c):
    c.send(c.headers(1, c.block(method="POST", extra=[("content-length", "4")]),
                     end_stream=False), frame(DATA, END_STREAM, 1, b"test"))
    return exchange_status(c, 1)


@case("generic/4/4", "RFC 9113 §8.1", "POST with a body and trailers -> 200")
def _(c):
    c.send(post(c), frame(DATA, 0, 1, b"test"),
           frame(HEADERS, END_STREAM | END_HEADERS, 1, fields_block([("x-trailer", "done")])))
    return exchange_status(c, 1)


# ---- generic/5: each HPACK representation (RFC 7541 6.1, 6.2.1-6.2.3, 6.3) -----------------------

def literal_field(kind, name, value, huffman):
    """A literal field: kind 0x40 incremental indexing, 0x00 without, 0x10 never indexed;
    name an int (static table index) or a string (new name)."""
    prefix = 6 if kind == 0x40 else 4
    if isinstance(name, int):
        return hpack_int(name, prefix, kind) + hpack_string(value, huffman)
    return bytes([kind]) + hpack_string(name, huffman) + hpack_string(value, huffman)


def served_with(c, extra):
    """A GET whose header block ends with `extra` (raw HPACK) is answered."""
    c.send(c.headers(1, c.block() + extra))
    return c.response_headers(1)


@case("generic/5/1", "RFC 7541 §6.1", "indexed field (from the dynamic table) -> served")
def _(c):
    # Adds "x-h2spec: 1" with incremental indexing on stream 1 (dynamic index 62), then uses it
    # by index alone on stream 3.
    c.send(c.headers(1, c.block() + literal_field(0x40, "x-h2spec", "1", False)))
    v = c.response_headers(1)
    if not v.ok:
        return v
    c.send(c.headers(3, c.block() + b"\xbe"))  # indexed, index 62
    return c.response_headers(3)


_KINDS = [(0x40, "with incremental indexing"), (0x00, "without indexing"),
          (0x10, "never indexed")]
_n = 2
for _kind, _kname in _KINDS:
    for _name, _nname in [(58, "indexed name"), ("x-h2spec", "new name")]:
        for _huff in (False, True):
            @case(f"generic/5/{_n}", "RFC 7541 §6.2",
                  f"literal {_kname}, {_nname}{' (Huffman)' if _huff else ''} -> served")
            def _(c, kind=_kind, name=_name, huff=_huff):
                return served_with(c, literal_field(kind, name, "h2spec-value", huff))
            _n += 1


sends(f"generic/5/{_n}", "RFC 7541 §6.3", "dynamic table size update to 0 -> served",
      lambda c: [c.headers(1, b"\x20" + c.block())], answered(1))
sends(f"generic/5/{_n + 1}", "RFC 7541 §6.3", "two dynamic table size updates -> served",
      lambda c: [c.headers(1, b"\x20" + hpack_int(4096, 5, 0x20) + c.block())], answered(1))
