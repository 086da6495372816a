"""The battery's cases for RFC 9113 sections 3.4 to 5: the preface, frame format and size,
header compression as the framing sees it, stream states and identifiers, concurrency and
error handling (h2spec's `http2` group 3-5, rewritten), and the frame helpers the other case
files share. Registered in h2spec_core.CASES on import."""

import struct

from h2_raw import (ACK, COMPRESSION_ERROR, CONTINUATION, DATA, END_HEADERS, END_STREAM,
                    FLOW_CONTROL_ERROR, FRAME_SIZE_ERROR, GOAWAY, HEADERS, INITIAL_WINDOW_SIZE,
                    PING, PRIORITY, PRIORITY_FLAG, PROTOCOL_ERROR, REFUSED_STREAM, RST_STREAM,
                    SETTINGS, STREAM_CLOSED, WINDOW_UPDATE, fields_block, frame, hpack_string,
                    settings)
from h2spec_core import (PASS, Verdict, accepted, answered, case, conn_error, ping_then, sends,
                         stream_error)

# Short names for the case tables.
PROTOCOL, FLOW, CLOSED, SIZE, REFUSED, COMPRESSION = (
    PROTOCOL_ERROR, FLOW_CONTROL_ERROR, STREAM_CLOSED, FRAME_SIZE_ERROR, REFUSED_STREAM,
    COMPRESSION_ERROR)
U32 = struct.Struct(">I")
DUMMY = fields_block([("x-dummy0", "dummy")])  # a CONTINUATION's worth of header block


def priority(parent=0, weight=15, exclusive=False):
    return U32.pack(parent | (0x80000000 if exclusive else 0)) + bytes([weight])


def post(c, sid=1, end_headers=True):
    return c.headers(sid, c.block(method="POST"), end_stream=False, end_headers=end_headers)


# ---- 3.4 (RFC 7540 3.5) connection preface, 4 frames -----------------------------------------

@case("3.5/1", "RFC 9113 §3.4", "client preface and SETTINGS -> server SETTINGS, then our ack",
      handshake=False)
def _(c):
    return PASS if c.handshake() else Verdict(False, "no SETTINGS exchange")


sends("3.5/2", "RFC 9113 §3.4", "invalid preface -> connection error PROTOCOL_ERROR",
      lambda c: [b"INVALID CONNECTION PREFACE\r\n\r\n"], conn_error(PROTOCOL), handshake=False)
sends("4.1/1", "RFC 9113 §4.1", "frame of unknown type, then PING -> ignored, PING ack",
      lambda c: [frame(0x16, 0, 0, bytes(8))], ping_then)


@case("4.1/2", "RFC 9113 §4.1", "PING with undefined flags -> flags ignored, PING ack")
def _(c):
    c.send(frame(PING, 0x16, 0, b"flagsxx!"))
    return c.ping_ack(b"flagsxx!")


@case("4.1/3", "RFC 9113 §4.1", "PING with the reserved bit set -> bit ignored, PING ack")
def _(c):
    c.send(frame(PING, 0, 0x80000000, b"reserved"))
    return c.ping_ack(b"reserved")


sends("4.2/1", "RFC 9113 §4.2", "DATA of 2^14 octets -> accepted, response HEADERS",
      lambda c: [post(c), frame(DATA, END_STREAM, 1, b"x" * 16384)], answered(1))
sends("4.2/2", "RFC 9113 §4.2", "DATA over SETTINGS_MAX_FRAME_SIZE -> FRAME_SIZE_ERROR",
      lambda c: [post(c), frame(DATA, END_STREAM, 1, b"x" * 16385)], stream_error(SIZE))


@case("4.2/3", "RFC 9113 §4.2", "HEADERS over SETTINGS_MAX_FRAME_SIZE -> conn FRAME_SIZE_ERROR")
def _(c):
    big = fields_block(c.fields() + [(f"x-dummy{i}", "x" * 4000) for i in range(5)])
    c.send(c.headers(1, big))
    return c.connection_error(SIZE)


sends("4.3/1", "RFC 9113 §4.3", "invalid header block fragment -> conn COMPRESSION_ERROR",
      lambda c: [frame(HEADERS, END_STREAM | END_HEADERS, 1, b"\x40")], conn_error(COMPRESSION))
sends("4.3/2", "RFC 9113 §4.3", "PRIORITY inside a header block -> conn PROTOCOL_ERROR",
      lambda c: [c.headers(1, end_headers=False), frame(PRIORITY, 0, 1, priority()),
                 frame(CONTINUATION, END_HEADERS, 1, DUMMY)], conn_error(PROTOCOL))
sends("4.3/3", "RFC 9113 §4.3",
      "HEADERS of another stream inside a header block -> PROTOCOL_ERROR",
      lambda c: [c.headers(1, end_headers=False), c.headers(3),
                 frame(CONTINUATION, END_HEADERS, 1, DUMMY)], conn_error(PROTOCOL))


# ---- 5.1 stream states ------------------------------------------------------------------------

sends("5.1/1", "RFC 9113 §5.1", "idle: DATA -> PROTOCOL_ERROR (or STREAM_CLOSED)",
      lambda c: [frame(DATA, END_STREAM, 1, b"test")], stream_error(PROTOCOL, CLOSED))
sends("5.1/2", "RFC 9113 §5.1", "idle: RST_STREAM -> conn PROTOCOL_ERROR",
      lambda c: [frame(RST_STREAM, 0, 1, U32.pack(8))], conn_error(PROTOCOL))
sends("5.1/3", "RFC 9113 §5.1", "idle: WINDOW_UPDATE -> conn PROTOCOL_ERROR",
      lambda c: [frame(WINDOW_UPDATE, 0, 1, U32.pack(100))], conn_error(PROTOCOL))
sends("5.1/4", "RFC 9113 §5.1", "idle: CONTINUATION -> conn PROTOCOL_ERROR",
      lambda c: [frame(CONTINUATION, END_HEADERS, 1, c.block())], conn_error(PROTOCOL))
sends("5.1/5", "RFC 9113 §5.1", "half-closed (remote): DATA -> STREAM_CLOSED",
      lambda c: [c.headers(1), frame(DATA, END_STREAM, 1, b"test")], stream_error(CLOSED))
sends("5.1/6", "RFC 9113 §5.1", "half-closed (remote): HEADERS -> STREAM_CLOSED",
      lambda c: [c.headers(1), c.headers(1)], stream_error(CLOSED))
sends("5.1/7", "RFC 9113 §5.1", "half-closed (remote): CONTINUATION -> STREAM_CLOSED or PROTOCOL",
      lambda c: [c.headers(1), frame(CONTINUATION, END_HEADERS, 1, DUMMY)],
      stream_error(CLOSED, PROTOCOL))


def discarded_or(c, sid, codes, stream_level=True, refer=True):
    """RFC 9113 5.1 on a frame received on a closed stream: an error of one of `codes` (a stream
    error too when stream_level), or the frame discarded after minimal processing: the request
    sent next on `sid` is served; when `refer`, that request refers to the dynamic table entry
    (index 62) that the discarded frame's header block added, so HPACK state was kept."""
    c.send(frame(HEADERS, END_STREAM | END_HEADERS, sid, c.block() + (b"\xbe" if refer else b"")))

    def judge(ev):
        if isinstance(ev, str):
            return ev == "closed"
        if ev[0] == GOAWAY or (stream_level and ev[0] == RST_STREAM and ev[2] == 1):
            return accepted(ev, codes)
        return True if ev[0] == HEADERS and ev[2] == sid else None
    return c.wait(judge)


# A HEADERS on a closed stream whose block adds "x-state: kept" to the dynamic table (index 62).
def indexing_headers(c, sid):
    return c.headers(sid, c.block() + b"\x40" + hpack_string("x-state") + hpack_string("kept"))


_MAY = "RFC 9113 relaxed RFC 7540's MUST to MAY: or discarded, HPACK state kept"


@case("5.1/8", "RFC 9113 §5.1, §6.1", "closed by our RST_STREAM: DATA -> STREAM_CLOSED; " + _MAY)
def _(c):
    c.send(post(c), frame(RST_STREAM, 0, 1, U32.pack(8)), frame(DATA, END_STREAM, 1, b"test"))
    return discarded_or(c, 3, (CLOSED,), refer=False)


@case("5.1/9", "RFC 9113 §5.1", "closed by our RST_STREAM: HEADERS -> STREAM_CLOSED; " + _MAY)
def _(c):
    c.send(post(c), frame(RST_STREAM, 0, 1, U32.pack(8)), indexing_headers(c, 1))
    return discarded_or(c, 3, (CLOSED, PROTOCOL))


sends("5.1/10", "RFC 9113 §5.1",
      "closed by our RST_STREAM: CONTINUATION -> STREAM_CLOSED or PROTOCOL_ERROR",
      lambda c: [post(c), frame(RST_STREAM, 0, 1, U32.pack(8)),
                 frame(CONTINUATION, END_HEADERS, 1, DUMMY)], stream_error(CLOSED, PROTOCOL))


def after_end(c, *frames):
    """Runs stream 1 to its end, then sends frames on it."""
    c.send(c.headers(1))
    v = c.stream_end(1)
    if not v.ok:
        return Verdict(False, f"stream 1 did not end: {v.actual}")
    c.send(*frames)
    return None


@case("5.1/11", "RFC 9113 §5.1, §6.1", "closed (both ends): DATA -> STREAM_CLOSED; " + _MAY)
def _(c):
    return after_end(c, frame(DATA, END_STREAM, 1, b"test")) or \
        discarded_or(c, 3, (CLOSED,), refer=False)


@case("5.1/12", "RFC 9113 §5.1", "closed (both ends): HEADERS -> conn STREAM_CLOSED; " + _MAY)
def _(c):
    return after_end(c, indexing_headers(c, 1)) or \
        discarded_or(c, 3, (CLOSED, PROTOCOL), stream_level=False)


@case("5.1/13", "RFC 9113 §5.1", "closed (both ends): CONTINUATION -> conn STREAM_CLOSED/PROTOCOL")
def _(c):
    return after_end(c, frame(CONTINUATION, END_HEADERS, 1, DUMMY)) or \
        c.connection_error(CLOSED, PROTOCOL)


sends("5.1.1/1", "RFC 9113 §5.1.1", "HEADERS on an even stream id -> conn PROTOCOL_ERROR",
      lambda c: [c.headers(2)], conn_error(PROTOCOL))
sends("5.1.1/2", "RFC 9113 §5.1.1",
      "HEADERS on stream 5, then on 3 -> conn PROTOCOL_ERROR (or STREAM_CLOSED: 3 is closed)",
      lambda c: [c.headers(5), c.headers(3)], conn_error(PROTOCOL, CLOSED))


@case("5.1.2/1", "RFC 9113 §5.1.2",
      "one stream over MAX_CONCURRENT_STREAMS -> REFUSED_STREAM or PROTOCOL_ERROR")
def _(c):
    limit = c.server_settings.get(3)
    if limit is None:
        return Verdict(False, "no SETTINGS_MAX_CONCURRENT_STREAMS advertised")
    c.send(frame(SETTINGS, 0, 0, settings((INITIAL_WINDOW_SIZE, 0))))  # responses stay open
    c.send(*(c.headers(1 + 2 * i) for i in range(limit + 1)))
    return c.stream_error(1 + 2 * limit, REFUSED, PROTOCOL)


@case("5.3.1/1", "RFC 7540 §5.3.1",
      "HEADERS depending on its own stream -> PROTOCOL_ERROR, or served (RFC 9113 dropped the "
      "rule with RFC 7540 priorities)")
def _(c):
    c.send(frame(HEADERS, END_STREAM | END_HEADERS | PRIORITY_FLAG, 1,
                 priority(parent=1) + c.block()))

    def judge(ev):
        if isinstance(ev, str):
            return ev == "closed"
        if ev[0] == GOAWAY or (ev[0] == RST_STREAM and ev[2] == 1):
            return accepted(ev, ())
        return True if ev[0] == HEADERS and ev[2] == 1 else None
    return c.wait(judge)


@case("5.3.1/2", "RFC 7540 §5.3.1",
      "PRIORITY depending on its own stream -> PROTOCOL_ERROR, or ignored (RFC 9113 dropped "
      "the rule with RFC 7540 priorities)")
def _(c):
    c.send(frame(PRIORITY, 0, 1, priority(parent=1)), frame(PING, 0, 0, b"selfdep!"))

    def judge(ev):
        if isinstance(ev, str):
            return ev == "closed"
        if ev[0] == GOAWAY or (ev[0] == RST_STREAM and ev[2] == 1):
            return accepted(ev, ())
        return (ev[3] == b"selfdep!") if ev[0] == PING and ev[1] & ACK else None
    return c.wait(judge)


@case("5.4.1/1", "RFC 9113 §5.4.1", "PING on stream 3 (a connection error) -> connection closed")
def _(c):
    c.send(frame(PING, 0, 3, bytes(8)))
    return c.connection_closed()


@case("5.4.1/2", "RFC 9113 §5.4.1", "PING on stream 3 -> GOAWAY PROTOCOL_ERROR first")
def _(c):
    c.send(frame(PING, 0, 3, bytes(8)))
    return c.goaway(PROTOCOL)


sends("5.5/1", "RFC 9113 §5.5", "unknown extension frame, then PING -> ignored, PING ack",
      lambda c: [frame(0x16, 0, 0, bytes(8))], ping_then)
sends("5.5/2", "RFC 9113 §5.5", "unknown extension frame inside a header block -> PROTOCOL_ERROR",
      lambda c: [c.headers(1, end_headers=False), frame(0x16, 0, 0, bytes(8))],
      conn_error(PROTOCOL))
