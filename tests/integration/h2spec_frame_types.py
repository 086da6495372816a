"""The battery's cases for RFC 9113 sections 6 and 7: every frame type's rules (DATA, HEADERS,
PRIORITY, RST_STREAM, SETTINGS, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION), flow control and the
error codes (h2spec's `http2` group 6-7, rewritten). Registered in h2spec_core.CASES on
import."""

from h2_raw import (ACK, CONTINUATION, DATA, END_HEADERS, END_STREAM, ENABLE_PUSH, GOAWAY,
                    HEADERS, INITIAL_WINDOW_SIZE, MAX_FRAME_SIZE, PADDED, PING, PRIORITY,
                    RST_STREAM, SETTINGS, WINDOW_UPDATE, frame, settings)
from h2spec_core import Verdict, answered, case, conn_error, ping_then, sends, stream_error
from h2spec_frames import CLOSED, DUMMY, FLOW, PROTOCOL, SIZE, U32, post, priority

# ---- 6.1 - 6.4 DATA, HEADERS, PRIORITY, RST_STREAM -------------------------------------------

sends("6.1/1", "RFC 9113 §6.1", "DATA on stream 0 -> conn PROTOCOL_ERROR",
      lambda c: [frame(DATA, END_STREAM, 0, b"test")], conn_error(PROTOCOL))
sends("6.1/2", "RFC 9113 §6.1", "DATA on a half-closed (remote) stream -> STREAM_CLOSED",
      lambda c: [c.headers(1, c.block(method="POST")), frame(DATA, END_STREAM, 1, b"test")],
      stream_error(CLOSED))
sends("6.1/3", "RFC 9113 §6.1", "DATA whose pad length exceeds the payload -> PROTOCOL_ERROR",
      lambda c: [post(c), frame(DATA, PADDED | END_STREAM, 1, b"\x06Test")], conn_error(PROTOCOL))
sends("6.2/1", "RFC 9113 §6.2", "HEADERS without END_HEADERS, then PRIORITY -> PROTOCOL_ERROR",
      lambda c: [c.headers(1, end_stream=False, end_headers=False),
                 frame(PRIORITY, 0, 1, priority()), frame(CONTINUATION, END_HEADERS, 1, DUMMY)],
      conn_error(PROTOCOL))
sends("6.2/2", "RFC 9113 §6.2", "HEADERS of stream 3 inside stream 1's block -> PROTOCOL_ERROR",
      lambda c: [c.headers(1, end_stream=False, end_headers=False), c.headers(3),
                 frame(CONTINUATION, END_HEADERS, 1, DUMMY)], conn_error(PROTOCOL))
sends("6.2/3", "RFC 9113 §6.2", "HEADERS on stream 0 -> conn PROTOCOL_ERROR",
      lambda c: [c.headers(0)], conn_error(PROTOCOL))


@case("6.2/4", "RFC 9113 §6.2", "HEADERS whose pad length exceeds the payload -> PROTOCOL_ERROR")
def _(c):
    block = c.block()
    c.send(frame(HEADERS, PADDED | END_STREAM | END_HEADERS, 1, bytes([len(block) + 2]) + block))
    return c.stream_error(1, PROTOCOL)


sends("6.3/1", "RFC 9113 §6.3", "PRIORITY on stream 0 -> conn PROTOCOL_ERROR",
      lambda c: [frame(PRIORITY, 0, 0, priority())], conn_error(PROTOCOL))
sends("6.3/2", "RFC 9113 §6.3", "PRIORITY of 4 octets -> FRAME_SIZE_ERROR",
      lambda c: [c.headers(1, end_stream=False), frame(PRIORITY, 0, 1, b"\x80\x00\x00\x01")],
      stream_error(SIZE))
sends("6.4/1", "RFC 9113 §6.4", "RST_STREAM on stream 0 -> conn PROTOCOL_ERROR",
      lambda c: [frame(RST_STREAM, 0, 0, U32.pack(8))], conn_error(PROTOCOL))
sends("6.4/2", "RFC 9113 §6.4", "RST_STREAM on an idle stream -> conn PROTOCOL_ERROR",
      lambda c: [frame(RST_STREAM, 0, 1, U32.pack(8))], conn_error(PROTOCOL))
sends("6.4/3", "RFC 9113 §6.4", "RST_STREAM of 3 octets -> FRAME_SIZE_ERROR",
      lambda c: [c.headers(1, end_stream=False), frame(RST_STREAM, 0, 1, b"\x00\x00\x00")],
      stream_error(SIZE))


# ---- 6.5 SETTINGS ---------------------------------------------------------------------------

sends("6.5/1", "RFC 9113 §6.5", "SETTINGS with ACK and a payload -> conn FRAME_SIZE_ERROR",
      lambda c: [frame(SETTINGS, ACK, 0, b"\x00")], conn_error(SIZE))
sends("6.5/2", "RFC 9113 §6.5", "SETTINGS on stream 1 -> conn PROTOCOL_ERROR",
      lambda c: [frame(SETTINGS, 0, 1, settings((3, 100)))], conn_error(PROTOCOL))
sends("6.5/3", "RFC 9113 §6.5", "SETTINGS of 3 octets -> conn FRAME_SIZE_ERROR",
      lambda c: [frame(SETTINGS, 0, 0, b"\x00\x03\x00")], conn_error(SIZE, PROTOCOL))
sends("6.5.2/1", "RFC 9113 §6.5.2", "SETTINGS_ENABLE_PUSH of 2 -> conn PROTOCOL_ERROR",
      lambda c: [frame(SETTINGS, 0, 0, settings((ENABLE_PUSH, 2)))], conn_error(PROTOCOL))
sends("6.5.2/2", "RFC 9113 §6.5.2", "SETTINGS_INITIAL_WINDOW_SIZE of 2^31 -> FLOW_CONTROL_ERROR",
      lambda c: [frame(SETTINGS, 0, 0, settings((INITIAL_WINDOW_SIZE, 1 << 31)))], conn_error(FLOW))
sends("6.5.2/3", "RFC 9113 §6.5.2", "SETTINGS_MAX_FRAME_SIZE of 16383 -> conn PROTOCOL_ERROR",
      lambda c: [frame(SETTINGS, 0, 0, settings((MAX_FRAME_SIZE, 16383)))], conn_error(PROTOCOL))
sends("6.5.2/4", "RFC 9113 §6.5.2", "SETTINGS_MAX_FRAME_SIZE of 2^24 -> conn PROTOCOL_ERROR",
      lambda c: [frame(SETTINGS, 0, 0, settings((MAX_FRAME_SIZE, 1 << 24)))], conn_error(PROTOCOL))
sends("6.5.2/5", "RFC 9113 §6.5.2", "SETTINGS with an unknown identifier -> ignored, PING ack",
      lambda c: [frame(SETTINGS, 0, 0, settings((0xFF, 1)))], ping_then)


def one_octet_of_data(c, windows, after=()):
    """SETTINGS_INITIAL_WINDOW_SIZE set to each of `windows` in one SETTINGS; once it is
    acknowledged, a GET on stream 1 and the frames `after`: rondel must send a DATA frame of one
    octet, the window it has."""
    c.send(frame(SETTINGS, 0, 0, settings(*((INITIAL_WINDOW_SIZE, w) for w in windows))))
    v = c.settings_ack()
    if not v.ok:
        return v
    c.send(c.headers(1), *after)
    return c.data_frame(1, length=1)


@case("6.5.3/1", "RFC 9113 §6.5.3", "INITIAL_WINDOW_SIZE 100 then 1 in one SETTINGS -> 1 applies")
def _(c):
    return one_octet_of_data(c, (100, 1))


@case("6.5.3/2", "RFC 9113 §6.5.3", "SETTINGS without ACK -> SETTINGS with ACK")
def _(c):
    c.send(frame(SETTINGS, 0, 0))
    return c.settings_ack()


# ---- 6.7 - 6.10 PING, GOAWAY, WINDOW_UPDATE, CONTINUATION ------------------------------------

@case("6.7/1", "RFC 9113 §6.7", "PING -> PING with ACK and the same payload")
def _(c):
    return ping_then(c, b"\x01\x02\x03\x04\x05\x06\x07\x08")


sends("6.7/2", "RFC 9113 §6.7", "PING with ACK -> not answered (the next PING's ack comes first)",
      lambda c: [frame(PING, ACK, 0, b"unasked!")], ping_then)
sends("6.7/3", "RFC 9113 §6.7", "PING on stream 1 -> conn PROTOCOL_ERROR",
      lambda c: [frame(PING, 0, 1, bytes(8))], conn_error(PROTOCOL))
sends("6.7/4", "RFC 9113 §6.7", "PING of 6 octets -> conn FRAME_SIZE_ERROR",
      lambda c: [frame(PING, 0, 0, bytes(6))], conn_error(SIZE))
sends("6.8/1", "RFC 9113 §6.8", "GOAWAY on stream 1 -> conn PROTOCOL_ERROR",
      lambda c: [frame(GOAWAY, 0, 1, U32.pack(0) + U32.pack(0))], conn_error(PROTOCOL))
sends("6.9/1", "RFC 9113 §6.9", "WINDOW_UPDATE of 0 on the connection -> conn PROTOCOL_ERROR",
      lambda c: [frame(WINDOW_UPDATE, 0, 0, U32.pack(0))], conn_error(PROTOCOL))
sends("6.9/2", "RFC 9113 §6.9", "WINDOW_UPDATE of 0 on a stream -> PROTOCOL_ERROR",
      lambda c: [post(c), frame(WINDOW_UPDATE, 0, 1, U32.pack(0))], stream_error(PROTOCOL))
sends("6.9/3", "RFC 9113 §6.9", "WINDOW_UPDATE of 3 octets -> conn FRAME_SIZE_ERROR",
      lambda c: [frame(WINDOW_UPDATE, 0, 0, b"\x00\x00\x01")], conn_error(SIZE))


@case("6.9.1/1", "RFC 9113 §6.9.1", "INITIAL_WINDOW_SIZE 1, then a GET -> DATA of 1 octet")
def _(c):
    return one_octet_of_data(c, (1,))


@case("6.9.1/2", "RFC 9113 §6.9.1", "connection window over 2^31-1 -> GOAWAY FLOW_CONTROL_ERROR")
def _(c):
    c.send(frame(WINDOW_UPDATE, 0, 0, U32.pack(0x7FFFFFFF)),
           frame(WINDOW_UPDATE, 0, 0, U32.pack(0x7FFFFFFF)))
    return c.goaway(FLOW)


@case("6.9.1/3", "RFC 9113 §6.9.1", "stream window over 2^31-1 -> RST_STREAM FLOW_CONTROL_ERROR")
def _(c):
    c.send(post(c), frame(WINDOW_UPDATE, 0, 1, U32.pack(0x7FFFFFFF)),
           frame(WINDOW_UPDATE, 0, 1, U32.pack(0x7FFFFFFF)))
    return c.wait(lambda ev: False if isinstance(ev, str) or ev[0] == GOAWAY else
                  (ev[3] == U32.pack(FLOW)) if ev[0] == RST_STREAM and ev[2] == 1 else None)


@case("6.9.2/1", "RFC 9113 §6.9.2", "INITIAL_WINDOW_SIZE 0, GET, then 1 -> DATA of 1 octet")
def _(c):
    return one_octet_of_data(c, (0,), [frame(SETTINGS, 0, 0, settings((INITIAL_WINDOW_SIZE, 1)))])


@case("6.9.2/2", "RFC 9113 §6.9.2", "window made negative by SETTINGS -> tracked: DATA of 1 octet")
def _(c):
    c.send(frame(SETTINGS, 0, 0, settings((INITIAL_WINDOW_SIZE, 3))))
    v = c.settings_ack()
    if not v.ok:
        return v
    c.send(c.headers(1))
    v = c.data_frame(1, length=3)
    if not v.ok:
        return Verdict(False, f"first DATA: {v.actual}")
    c.send(frame(SETTINGS, 0, 0, settings((INITIAL_WINDOW_SIZE, 2))))  # window 2 - 3 = -1
    v = c.settings_ack()
    if not v.ok:
        return v
    c.send(frame(WINDOW_UPDATE, 0, 1, U32.pack(2)))  # -1 + 2 = 1
    return c.data_frame(1, length=1)


sends("6.9.2/3", "RFC 9113 §6.9.2", "INITIAL_WINDOW_SIZE 2^31 -> conn FLOW_CONTROL_ERROR",
      lambda c: [frame(SETTINGS, 0, 0, settings((INITIAL_WINDOW_SIZE, 1 << 31)))], conn_error(FLOW))
sends("6.10/1", "RFC 9113 §6.10", "HEADERS then two CONTINUATION -> accepted, response HEADERS",
      lambda c: [c.headers(1, end_headers=False), frame(CONTINUATION, 0, 1, DUMMY),
                 frame(CONTINUATION, END_HEADERS, 1, DUMMY)], answered(1))
sends("6.10/2", "RFC 9113 §6.10", "CONTINUATION followed by DATA -> conn PROTOCOL_ERROR",
      lambda c: [post(c, end_headers=False), frame(CONTINUATION, 0, 1, DUMMY),
                 frame(DATA, END_STREAM, 1, b"test")], conn_error(PROTOCOL))
sends("6.10/3", "RFC 9113 §6.10", "CONTINUATION on stream 0 -> conn PROTOCOL_ERROR",
      lambda c: [c.headers(1, end_headers=False), frame(CONTINUATION, END_HEADERS, 0, DUMMY)],
      conn_error(PROTOCOL))
sends("6.10/4", "RFC 9113 §6.10", "CONTINUATION after HEADERS with END_HEADERS -> PROTOCOL_ERROR",
      lambda c: [c.headers(1), frame(CONTINUATION, END_HEADERS, 1, DUMMY)],
      conn_error(PROTOCOL, CLOSED))
sends("6.10/5", "RFC 9113 §6.10", "CONTINUATION after one with END_HEADERS -> PROTOCOL_ERROR",
      lambda c: [c.headers(1, end_headers=False), frame(CONTINUATION, END_HEADERS, 1, DUMMY),
                 frame(CONTINUATION, END_HEADERS, 1, DUMMY)], conn_error(PROTOCOL, CLOSED))
sends("6.10/6", "RFC 9113 §6.10", "CONTINUATION after DATA -> conn PROTOCOL_ERROR",
      lambda c: [post(c), frame(DATA, 0, 1, b"test"), frame(CONTINUATION, END_HEADERS, 1, DUMMY)],
      conn_error(PROTOCOL))


# ---- 7 error codes -----------------------------------------------------------------------------

@case("7/1", "RFC 9113 §7", "GOAWAY with an unknown error code -> no special behaviour")
def _(c):
    """After our GOAWAY rondel may still answer the PING, or end the connection gracefully."""
    c.send(frame(GOAWAY, 0, 0, U32.pack(0) + U32.pack(0xFF)), frame(PING, 0, 0, b"afterga!"))

    def judge(ev):
        if isinstance(ev, str):
            return ev == "closed"
        if ev[0] == PING and ev[1] & ACK:
            return ev[3] == b"afterga!"
        return (ev[3][4:8] == U32.pack(0)) if ev[0] == GOAWAY else None
    return c.wait(judge)


sends("7/2", "RFC 9113 §7", "RST_STREAM with an unknown error code -> no special behaviour",
      lambda c: [post(c), frame(RST_STREAM, 0, 1, U32.pack(0xFF))], ping_then)

