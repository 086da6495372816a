"""HEADERS on a stream id below the last one the client opened (issue 32, item 10).

nghttp2 keeps no closed streams in rondel's sessions, and ignores such a frame on purpose. rondel
decides (Http2Session::ClosedStreams, docs/reliability.md "HTTP/2 defences"):
- a stream the client never opened: connection error PROTOCOL_ERROR (RFC 9113 5.1.1: new stream
  ids must increase; the lower idle ones were closed implicitly);
- a stream that closed normally (both sides ended): connection error STREAM_CLOSED
  (RFC 9113 5.1, "closed");
- a stream rondel reset: ignored, since the client may have sent it before it saw the reset
  (RFC 9113 5.1; test_http2_floods.Http2AnswerBeforeRequestEnds sends trailers after the reset).
Before 2026-12-04 the first two were silently ignored.
"""
import unittest

from h2_raw import (END_HEADERS, END_STREAM, HEADERS, connect, frame, goaway_code,
                    read_frames_until, read_until_closed, request_block)
from harness import BackendGroup, Rondel, main
from test_http2_floods import h2c_config

PROTOCOL_ERROR, STREAM_CLOSED = 0x1, 0x5


class Http2StreamIds(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.group = BackendGroup(["b0"])
        cls.rondel = Rondel(h2c_config(cls.group.members[0].address))
        cls.port = cls.rondel.ports["h2"]

    @classmethod
    def tearDownClass(cls):
        code = cls.rondel.stop()
        cls.group.stop()
        assert code == 0, code

    def served(self, s, sid, path="/"):
        s.sendall(frame(HEADERS, END_HEADERS | END_STREAM, sid, request_block(path)))
        frames, _ = read_frames_until(s, lambda f: f[2] == sid and f[1] & END_STREAM, limit_s=10)
        self.assertTrue(any(t == HEADERS and sid_ == sid for t, _, sid_, _ in frames), frames)

    def goaway_after(self, served_sid, late_sid):
        """The GOAWAY code rondel ends the connection with when, after stream served_sid was
        served, a HEADERS frame opens late_sid."""
        s = connect(self.port)
        try:
            self.served(s, served_sid)
            s.sendall(frame(HEADERS, END_HEADERS | END_STREAM, late_sid, request_block("/late")))
            frames = read_until_closed(s, limit_s=10)
        finally:
            s.close()
        return goaway_code(frames), frames

    def test_headers_on_a_lower_never_opened_stream_is_protocol_error(self):
        code, frames = self.goaway_after(5, 3)
        self.assertEqual(code, PROTOCOL_ERROR, frames)

    def test_headers_on_a_closed_stream_is_stream_closed(self):
        code, frames = self.goaway_after(1, 1)
        self.assertEqual(code, STREAM_CLOSED, frames)

    def test_increasing_ids_with_gaps_are_served(self):
        s = connect(self.port)
        try:
            for sid in (1, 7, 9, 21):
                self.served(s, sid, f"/s{sid}")
        finally:
            s.close()


if __name__ == "__main__":
    main()
