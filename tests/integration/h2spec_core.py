"""The h2spec-style battery's machinery: the case registry, a client connection with the
request helpers every case uses, and the verdicts (h2spec's rules, with the error code checked
whenever a GOAWAY or RST_STREAM carries one).

A case is a function of a Client that sends frames and returns a Verdict; @case registers it
with its name (h2spec's numbering: `6.5.3/2`, `hpack/4.2/1`, `generic/3.1/1`), the section of
the RFC it checks (RFC 9113 numbering where it differs from RFC 7540's) and what it sends and
expects. Every case runs on a connection of its own, and every read is bounded by the client's
timeout.

- connection error: GOAWAY with one of the codes, or the connection closed (without a GOAWAY
  of another code).
- stream error: RST_STREAM on that stream with one of the codes, or the connection error.
- "one of the codes" includes the generic PROTOCOL_ERROR and INTERNAL_ERROR, which RFC 9113 5.4
  lets an endpoint send in place of a more specific code; any other code fails the case (h2spec
  passes any close). Where the RFC names the frame and its code (5.4.1/2, 6.9.1/2, 6.9.1/3),
  that frame with that code is required.
- rejected request (h2->h1 rules): the stream error PROTOCOL_ERROR or a 4xx response (RFC 9113
  8.1.1: a server MAY answer a malformed request before it resets the stream).
"""

import struct
import time
from collections import namedtuple

from h2_raw import (ACK, CONTINUATION, DATA, END_HEADERS, END_STREAM, GOAWAY, HEADERS,
                    INTERNAL_ERROR, PING, PROTOCOL_ERROR, RST_STREAM, SETTINGS, WINDOW_UPDATE,
                    H2Conn, describe, fields_block, frame)

Case = namedtuple("Case", "name rfc desc run handshake")
CASES = []


def case(name, rfc, desc, handshake=True):
    """Registers the decorated function as the case `name`; it runs after the SETTINGS exchange
    (Client.handshake) unless handshake is False."""
    def register(fn):
        CASES.append(Case(name, rfc, desc, fn, handshake))
        return fn
    return register


def sends(name, rfc, desc, frames, verdict, handshake=True):
    """Registers the case of one table row: send frames(c) (a list), then judge with verdict(c)."""
    @case(name, rfc, desc, handshake)
    def _(c):
        c.send(*frames(c))
        return verdict(c)


def conn_error(*codes):
    return lambda c: c.connection_error(*codes)


def stream_error(*codes):
    """A stream error on stream 1, the stream the table rows use."""
    return lambda c: c.stream_error(1, *codes)


def answered(sid):
    return lambda c: c.response_headers(sid)


class Verdict(namedtuple("Verdict", "ok actual")):
    """ok: the case held; actual: what rondel did, in a few words."""


PASS = Verdict(True, "")


class Client(H2Conn):
    """An H2Conn with the request a case starts from (h2spec's common headers) and the waits
    the verdicts are made of. `path` is a target of the test backend that answers with a body,
    so flow control has DATA to hold back."""

    def __init__(self, port, tls=None, authority=None, timeout=2.0):
        super().__init__(port, tls=tls, server_hostname="site.test" if tls else None,
                         timeout=timeout)
        self.scheme = "https" if tls else "http"
        self.authority = authority or f"127.0.0.1:{port}"
        self.path = "/h2spec?size=100"

    def fields(self, method="GET", path=None, extra=()):
        return [(":method", method), (":scheme", self.scheme), (":path", path or self.path),
                (":authority", self.authority), *extra]

    def block(self, **kw):
        return fields_block(self.fields(**kw))

    def headers(self, sid, block=None, end_stream=True, end_headers=True, flags=0):
        """A HEADERS frame on sid carrying `block` (default: a GET of self.path)."""
        fl = flags | (END_STREAM if end_stream else 0) | (END_HEADERS if end_headers else 0)
        return frame(HEADERS, fl, sid, self.block() if block is None else block)

    def request(self, sid, fields, body=None):
        """Sends a request with these fields (and a body in one DATA frame)."""
        self.send(frame(HEADERS, END_HEADERS | (END_STREAM if body is None else 0), sid,
                        fields_block(fields)))
        if body is not None:
            self.send(frame(DATA, END_STREAM, sid, body))

    def wait(self, judge):
        """Feeds each event to judge(ev) -> True (held), False (did not) or None (go on) until
        one decides or the timeout passes. Returns a Verdict naming what came last."""
        last = None
        deadline = time.monotonic() + self.timeout
        while True:
            ev = self.recv_event(max(0.0, deadline - time.monotonic()))
            verdict = judge(ev)
            if not isinstance(ev, str):
                last = describe(ev)
            if verdict is not None or isinstance(ev, str):
                return Verdict(bool(verdict), "" if verdict else self._actual(ev, last))

    def _actual(self, ev, last):
        """What rondel did, for a verdict that did not hold at event ev."""
        if not isinstance(ev, str):
            return describe(ev)
        if ev == "timeout" and last is None:
            return f"nothing within {self.timeout:.0f}s"
        return f"{ev} after {last}" if last else ev

    def connection_error(self, *codes):
        def judge(ev):
            if ev == "closed":
                return True
            if ev == "timeout":
                return False
            if ev[0] == GOAWAY:
                return accepted(ev, codes)
            return None
        return self.wait(judge)

    def stream_error(self, sid, *codes):
        def judge(ev):
            if ev == "closed":
                return True
            if ev == "timeout":
                return False
            if ev[0] == GOAWAY or (ev[0] == RST_STREAM and ev[2] == sid):
                return accepted(ev, codes)
            return None
        return self.wait(judge)

    def connection_closed(self):
        return self.wait(lambda ev: True if ev == "closed" else False if ev == "timeout"
                         else None)

    def goaway(self, *codes):
        return self.wait(lambda ev: None if isinstance(ev, tuple) and ev[0] != GOAWAY
                         else (not isinstance(ev, str) and code_of(ev) in codes))

    def response_headers(self, sid):
        """Held when a HEADERS frame answers stream sid."""
        def judge(ev):
            if isinstance(ev, str) or ev[0] == GOAWAY or (ev[0] == RST_STREAM and ev[2] == sid):
                return False
            return True if ev[0] == HEADERS and ev[2] == sid else None
        return self.wait(judge)

    def ping_ack(self, data):
        def judge(ev):
            if isinstance(ev, str) or ev[0] == GOAWAY:
                return False
            return (ev[1] & ACK and ev[3] == data) if ev[0] == PING else None
        return self.wait(judge)

    def settings_ack(self):
        def judge(ev):
            if isinstance(ev, str) or ev[0] == GOAWAY:
                return False
            return bool(ev[1] & ACK) if ev[0] == SETTINGS else None
        return self.wait(judge)

    def data_frame(self, sid, length=None):
        """Held when the next DATA frame of stream sid comes (with `length` bytes if given)."""
        def judge(ev):
            if isinstance(ev, str) or ev[0] == GOAWAY or (ev[0] == RST_STREAM and ev[2] == sid):
                return False
            if ev[0] == DATA and ev[2] == sid:
                return length is None or len(ev[3]) == length
            return None
        return self.wait(judge)

    def stream_end(self, sid):
        """Held when stream sid ends: END_STREAM from rondel, or RST_STREAM NO_ERROR."""
        def judge(ev):
            if isinstance(ev, str) or ev[0] == GOAWAY:
                return False
            if ev[0] == RST_STREAM and ev[2] == sid:
                return code_of(ev) == 0
            return True if ev[0] in (DATA, HEADERS) and ev[2] == sid and ev[1] & END_STREAM \
                else None
        return self.wait(judge)

    def exchange(self, sid):
        """(status, body) of stream sid's whole response, or (None, Verdict) when it was reset,
        the connection ended or the timeout passed first."""
        status, body = None, b""

        def judge(ev):
            nonlocal status, body
            if isinstance(ev, str) or ev[0] == GOAWAY or (ev[0] == RST_STREAM and ev[2] == sid):
                return False
            if ev[2] != sid or ev[0] not in (HEADERS, DATA, CONTINUATION):
                return None
            if ev[4] is not None and status is None:
                status = int(dict(ev[4]).get(":status", "0"))
            if ev[0] == DATA:
                body += ev[3]
                if ev[3]:  # give the connection window back, so long bodies arrive
                    self.send(frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", len(ev[3]))),
                              frame(WINDOW_UPDATE, 0, sid, struct.pack(">I", len(ev[3]))))
            return True if ev[1] & END_STREAM else None
        v = self.wait(judge)
        return (status, body) if v.ok else (None, v)


def code_of(ev):
    """The error code of a GOAWAY or RST_STREAM event."""
    p = ev[3]
    return struct.unpack(">I", p[4:8] if ev[0] == GOAWAY else p[:4])[0]


def accepted(ev, codes):
    """Whether a GOAWAY or RST_STREAM carries one of `codes`, or a generic code, which RFC 9113
    5.4 lets an endpoint use in place of any more specific one."""
    return code_of(ev) in codes or code_of(ev) in (PROTOCOL_ERROR, INTERNAL_ERROR)


def ping_then(c, data=b"h2spec!!"):
    """Sends a PING and waits for its ack: the frames sent before it were ignored, as asked."""
    c.send(frame(PING, 0, 0, data))
    return c.ping_ack(data)


def echoed_head(c, sid, fields):
    """Sends a GET of /_echo with these fields (the test backend answers with the request head it
    received) and returns (the head as text, None), or (None, Verdict) when it was not served."""
    c.request(sid, fields)
    status, body = c.exchange(sid)
    if status is None:
        return None, body
    if status != 200:
        return None, Verdict(False, f"answered {status}")
    return body.decode("latin-1"), None

