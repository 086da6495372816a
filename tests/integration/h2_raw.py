"""Raw HTTP/2 for the integration tests: frames built by hand (so a test can send what no client
library would send), read back with a time limit, header blocks written literally and responses
decoded with the python3-hpack package. Used by test_http2_floods.py and the h2spec-style
battery (test_h2spec.py)."""

import collections
import socket
import ssl
import struct
import sys
import time

try:
    import hpack
except ImportError:  # run by hand with a python3 of its own first on PATH (pyenv, a venv)
    sys.path.append("/usr/lib/python3/dist-packages")
    import hpack
from hpack.huffman import HuffmanEncoder  # noqa: E402
from hpack.huffman_constants import REQUEST_CODES, REQUEST_CODES_LENGTH  # noqa: E402

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
(DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, GOAWAY, WINDOW_UPDATE,
 CONTINUATION) = range(10)
END_STREAM, ACK, END_HEADERS, PADDED, PRIORITY_FLAG = 0x1, 0x1, 0x4, 0x8, 0x20
FRAME_NAMES = ["DATA", "HEADERS", "PRIORITY", "RST_STREAM", "SETTINGS", "PUSH_PROMISE", "PING",
               "GOAWAY", "WINDOW_UPDATE", "CONTINUATION"]
ERROR_NAMES = ["NO_ERROR", "PROTOCOL_ERROR", "INTERNAL_ERROR", "FLOW_CONTROL_ERROR",
               "SETTINGS_TIMEOUT", "STREAM_CLOSED", "FRAME_SIZE_ERROR", "REFUSED_STREAM", "CANCEL",
               "COMPRESSION_ERROR", "CONNECT_ERROR", "ENHANCE_YOUR_CALM", "INADEQUATE_SECURITY",
               "HTTP_1_1_REQUIRED"]
(NO_ERROR, PROTOCOL_ERROR, INTERNAL_ERROR, FLOW_CONTROL_ERROR, SETTINGS_TIMEOUT, STREAM_CLOSED,
 FRAME_SIZE_ERROR, REFUSED_STREAM, CANCEL, COMPRESSION_ERROR) = range(10)
# SETTINGS identifiers (RFC 9113 6.5.2).
(HEADER_TABLE_SIZE, ENABLE_PUSH, MAX_CONCURRENT_STREAMS, INITIAL_WINDOW_SIZE, MAX_FRAME_SIZE,
 MAX_HEADER_LIST_SIZE) = range(1, 7)


# What reading a peer's frames can raise besides a verdict: a frame too short for its type, a
# header block rondel encoded that hpack cannot decode.
READ_ERRORS = (OSError, ValueError, IndexError, struct.error, hpack.HPACKError)


def frame(ftype, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + \
        struct.pack(">I", stream) + payload


def settings(*pairs):
    """A SETTINGS payload of (identifier, value) pairs."""
    return b"".join(struct.pack(">HI", k, v) for k, v in pairs)


def literal(index, value):
    """HPACK literal field without indexing, name from the static table, value raw (< 127)."""
    v = value.encode()
    name = bytes([index]) if index < 15 else bytes([15, index - 15])  # 4-bit prefix integer
    return name + bytes([len(v)]) + v


def request_block(path="/"):
    # :method GET, :scheme http (indexed), :path literal, :authority literal.
    return b"\x82\x86" + literal(4, path) + literal(1, "127.0.0.1")


def hpack_int(value, prefix_bits, first=0):
    """An HPACK integer (RFC 7541 5.1) with `first`'s high bits above the prefix."""
    out = bytearray(hpack.hpack.encode_integer(value, prefix_bits))
    out[0] |= first
    return bytes(out)


def hpack_string(s, huffman=False):
    """An HPACK string literal (RFC 7541 5.2), raw or Huffman-coded."""
    b = s.encode() if isinstance(s, str) else s
    if huffman:
        b = HuffmanEncoder(REQUEST_CODES, REQUEST_CODES_LENGTH).encode(b)
    return hpack_int(len(b), 7, 0x80 if huffman else 0) + b


def fields_block(fields):
    """A header block of (name, value) pairs, each a literal without indexing with a literal
    name: no dynamic-table state, so any block can follow any other on a connection."""
    return b"".join(b"\x00" + hpack_string(n) + hpack_string(v) for n, v in fields)


def split_frames(buf):
    """The whole frames (type, flags, stream, payload) at the start of buf, and the rest."""
    frames = []
    while len(buf) >= 9 and len(buf) >= 9 + int.from_bytes(buf[:3], "big"):
        n = int.from_bytes(buf[:3], "big")
        frames.append((buf[3], buf[4], int.from_bytes(buf[5:9], "big") & 0x7FFFFFFF,
                       buf[9:9 + n]))
        buf = buf[9 + n:]
    return frames, buf


def connect(port, settings_payload=b""):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(PREFACE + frame(SETTINGS, 0, 0, settings_payload))
    return s


def read_until_closed(s, limit_s=10):
    """Every frame (type, flags, stream, payload) until the peer closes."""
    s.settimeout(limit_s)
    buf = b""
    try:
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
    except (ConnectionResetError, socket.timeout):
        pass
    return split_frames(buf)[0]


def read_frames_until(s, done, buf=b"", limit_s=5):
    """Frames (type, flags, stream, payload) as they arrive, until done(frame) holds for one, the
    peer closes or limit_s passes; with the bytes of a frame not yet whole, for the next call."""
    frames = []
    deadline = time.monotonic() + limit_s
    s.settimeout(limit_s)
    while time.monotonic() < deadline:
        try:
            chunk = s.recv(65536)
        except socket.timeout:
            break
        if not chunk:
            break
        buf += chunk
        new, buf = split_frames(buf)
        frames += new
        if any(done(f) for f in new):
            break
    return frames, buf


def goaway_code(frames):
    codes = [struct.unpack(">II", p[:8])[1] for t, _, _, p in frames if t == GOAWAY]
    return codes[-1] if codes else None


def send_all(s, data):
    try:
        s.sendall(data)
    except (BrokenPipeError, ConnectionResetError):
        pass  # rondel closed first: that is the defence


def error_name(code):
    return ERROR_NAMES[code] if code < len(ERROR_NAMES) else f"0x{code:x}"


def describe(f):
    """One received frame, for a report: 'GOAWAY PROTOCOL_ERROR', 'HEADERS(1) :status 200'."""
    t, fl, sid, p = f[:4]
    name = FRAME_NAMES[t] if t < len(FRAME_NAMES) else f"type 0x{t:x}"
    if t == GOAWAY and len(p) >= 8:
        debug = p[8:60].decode("latin-1")
        return f"GOAWAY {error_name(struct.unpack('>I', p[4:8])[0])}" + \
            (f" ({debug})" if debug else "")
    if t == RST_STREAM and len(p) >= 4:
        return f"RST_STREAM({sid}) {error_name(struct.unpack('>I', p)[0])}"
    if t == HEADERS and len(f) > 4 and f[4] is not None:
        return f"HEADERS({sid}) :status {dict(f[4]).get(':status')}"
    return f"{name}({sid}, {len(p)} bytes, flags 0x{fl:x})"


class H2Conn:
    """One client HTTP/2 connection on 127.0.0.1:port (TLS with ALPN h2 when `tls` is an
    ssl.SSLContext). recv_event() returns the next frame as (type, flags, stream, payload,
    headers), headers being the decoded field list of a whole HEADERS block (CONTINUATIONs
    joined) and None otherwise; or "closed", or "timeout" once `timeout` passes. Every read is
    bounded; a send to a peer that already closed is ignored (the reads say what happened)."""

    def __init__(self, port, tls=None, server_hostname=None, timeout=2.0):
        raw = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        # Frames go out as the case sends them: no Nagle wait for the ack of the last write.
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock = tls.wrap_socket(raw, server_hostname=server_hostname) if tls else raw
        self.timeout = timeout
        self.buf = b""  # bytes of a frame not yet whole
        self.frames = collections.deque()  # whole frames not yet returned
        self.closed = False
        self.decoder = hpack.Decoder()
        self.pending = None  # (stream, flags, block) of a header block still open
        self.server_settings = {}

    def send(self, *frames):
        try:
            self.sock.sendall(b"".join(frames))
        except (OSError, ssl.SSLError):
            pass

    def handshake(self, settings_payload=b""):
        """Preface and SETTINGS both ways, both acknowledged (h2spec's handshake). False when
        the server's SETTINGS and the ack of ours did not both come within the timeout."""
        self.send(PREFACE, frame(SETTINGS, 0, 0, settings_payload))
        got_settings = got_ack = False
        while not (got_settings and got_ack):
            ev = self.recv_event()
            if isinstance(ev, str):
                return False
            if ev[0] == SETTINGS and ev[1] & ACK:
                got_ack = True
            elif ev[0] == SETTINGS:
                got_settings = True
                p = ev[3]
                self.server_settings.update(struct.unpack(">HI", p[i:i + 6])
                                            for i in range(0, len(p) - 5, 6))
                self.send(frame(SETTINGS, ACK, 0))
        return True

    def _read(self, deadline):
        left = deadline - time.monotonic()
        if left <= 0:
            return "timeout"
        self.sock.settimeout(left)
        try:
            chunk = self.sock.recv(65536)
        except (socket.timeout, ssl.SSLWantReadError):
            return "timeout"
        except (OSError, ssl.SSLError):
            chunk = b""
        if not chunk:
            self.closed = True
            return "closed"
        self.buf += chunk
        return None

    def recv_event(self, timeout=None):
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while not self.frames:
            if self.closed:
                return "closed"
            status = self._read(deadline)
            if status:
                return status
            frames, self.buf = split_frames(self.buf)
            self.frames.extend(frames)
        return self._decoded(self.frames.popleft())

    def _decoded(self, f):
        t, fl, sid, p = f
        if t == HEADERS:
            pad = p[0] if fl & PADDED else 0
            p = p[(1 if fl & PADDED else 0) + (5 if fl & PRIORITY_FLAG else 0):len(p) - pad]
            self.pending = (sid, fl, p)
        elif t == CONTINUATION and self.pending:
            self.pending = (sid, self.pending[1] | (fl & END_HEADERS), self.pending[2] + p)
        if t in (HEADERS, CONTINUATION) and self.pending and self.pending[1] & END_HEADERS:
            block = self.pending[2]
            self.pending = None
            return (t, fl, sid, f[3], [(n.decode(), v.decode())
                                       for n, v in self.decoder.decode(block, raw=True)])
        return (t, fl, sid, f[3], None)

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass
