"""A loopback TCP proxy in front of a real S3 server that fails the way networks and servers do.

It relays HTTP/1.1 requests one at a time per connection (keep-alive, `Expect: 100-continue`,
chunked answers) and asks `rule(method, path)` what to do with each:

* `Fault.forward()` — relay it (optionally after `delay` seconds);
* `Fault.drop()` — send the request to the server, read its whole answer, then close the
  client's connection without a byte of it: the write landed, the client never learns it;
* `Fault.reset()` — reset the client's connection (RST) before anything reaches the server.

Any fault may then `refuse` connections for some seconds (the listening socket is closed and
every open connection dropped, so the client's next request is refused at connect, as from a
server that went away), and run `on_answer` once the server answered and before the client
sees anything (kill the server there: the client's next request meets a dead server).
`refuse_for` / `refuse_until` do the same from the test's thread.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

FORWARD = "forward"
DROP = "drop"
RESET = "reset"


@dataclass(frozen=True)
class Fault:
    kind: str = FORWARD
    delay: float = 0.0
    #: Seconds to refuse connections after this request (0: none).
    refuse: float = 0.0
    #: Called once the server answered, before the client gets anything.
    on_answer: Callable[[], None] | None = None

    @classmethod
    def forward(cls, delay: float = 0.0) -> Fault:
        return cls(FORWARD, delay)

    @classmethod
    def drop(cls, refuse: float = 0.0) -> Fault:
        return cls(DROP, refuse=refuse)

    @classmethod
    def reset(cls) -> Fault:
        return cls(RESET)


Rule = Callable[[str, str], Fault]


def _forward_all(method: str, path: str) -> Fault:
    return Fault.forward()


class _Closed(Exception):
    """The peer closed the connection."""


class _Conn:
    """Buffered reads from a socket."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buf = b""

    def _fill(self) -> None:
        data = self.sock.recv(65536)
        if not data:
            raise _Closed
        self.buf += data

    def until(self, marker: bytes) -> bytes:
        while marker not in self.buf:
            self._fill()
        i = self.buf.index(marker) + len(marker)
        out, self.buf = self.buf[:i], self.buf[i:]
        return out

    def exactly(self, n: int) -> bytes:
        while len(self.buf) < n:
            self._fill()
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def rest(self) -> bytes:
        with contextlib.suppress(_Closed):
            while True:
                self._fill()
        out, self.buf = self.buf, b""
        return out


def _headers(head: bytes) -> dict[str, str]:
    lines = head.decode("latin-1").split("\r\n")[1:]
    out: dict[str, str] = {}
    for line in lines:
        if ":" in line:
            k, v = line.split(":", 1)
            out[k.strip().lower()] = v.strip()
    return out


def _body(conn: _Conn, headers: dict[str, str], until_close: bool) -> bytes:
    """The raw body bytes that follow a head (as sent: chunk framing kept)."""
    if "chunked" in headers.get("transfer-encoding", "").lower():
        out = b""
        while True:
            size_line = conn.until(b"\r\n")
            out += size_line
            size = int(size_line.split(b";")[0].strip(), 16)
            if size == 0:
                out += conn.until(b"\r\n\r\n") if conn.buf[:2] != b"\r\n" else conn.exactly(2)
                return out
            out += conn.exactly(size + 2)
    if "content-length" in headers:
        return conn.exactly(int(headers["content-length"]))
    return conn.rest() if until_close else b""


def _rst(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    with contextlib.suppress(OSError):
        sock.close()


@dataclass
class FaultProxy:
    """The proxy on 127.0.0.1:`port` (a free port at start, kept across refusals)."""

    upstream_host: str
    upstream_port: int
    rule: Rule = field(default=_forward_all)
    seen: list[tuple[str, str, str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._current = threading.local()
        self._clients: set[socket.socket] = set()
        self._upstreams: set[socket.socket] = set()
        self._refused_until = 0.0
        self._hold: threading.Event | None = None
        self._stopped = False
        self._listener: socket.socket | None = None
        self.port = 0
        self._open_listener()
        self._acceptor = threading.Thread(target=self._accept_loop, daemon=True)
        self._acceptor.start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # -- refusing connections -----------------------------------------------------------------
    def _open_listener(self) -> None:
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", self.port))
        except OSError:
            s.close()
            raise
        s.listen(128)
        s.settimeout(0.05)
        self.port = s.getsockname()[1]
        self._listener = s

    def _go_away(self) -> None:
        """Close the listener and every client connection (callers hold the lock) but the
        one whose answer is being relayed (an `on_answer` refusing: that answer arrives, then
        the connection closes)."""
        if self._listener is not None:
            # shutdown first: the accept thread's poll holds the socket open past close(),
            # and it would take connections (then reset them) instead of refusing them.
            with contextlib.suppress(OSError):
                self._listener.shutdown(socket.SHUT_RDWR)
            self._listener.close()
            self._listener = None
        spare = getattr(self._current, "client", None)
        for c in list(self._clients):
            if c is not spare:
                _rst(c)
                self._clients.discard(c)
        # Reset (not closed) towards the server too: a server killed next leaves no
        # TIME_WAIT on its port, so it can be restarted on the same port at once.
        for u in list(self._upstreams):
            _rst(u)
        self._upstreams.clear()

    def refuse_for(self, seconds: float) -> None:
        """Refuse connections for `seconds` from now (open connections are dropped)."""
        with self._lock:
            self._refused_until = max(self._refused_until, time.monotonic() + seconds)
            self._go_away()

    def refuse_until(self, event: threading.Event) -> None:
        """Refuse connections until `event` is set (e.g. a restarted server is healthy)."""
        with self._lock:
            self._hold = event
            self._go_away()

    def _refusing(self) -> bool:
        hold = self._hold
        if hold is not None and not hold.is_set():
            return True
        self._hold = None
        return time.monotonic() < self._refused_until

    def _accept_loop(self) -> None:
        while not self._stopped:
            with self._lock:
                if self._listener is None and not self._refusing() and not self._stopped:
                    with contextlib.suppress(OSError):  # not free yet: next turn
                        self._open_listener()
                listener = self._listener
            if listener is None:
                time.sleep(0.02)
                continue
            try:
                client, _ = listener.accept()
            except (TimeoutError, OSError):
                continue
            client.settimeout(None)
            with self._lock:
                if self._listener is None:
                    _rst(client)
                    continue
                self._clients.add(client)
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    # -- relaying -------------------------------------------------------------------------------
    def _serve(self, client: socket.socket) -> None:
        self._current.client = client
        upstream: socket.socket | None = None
        cin, uin = _Conn(client), None
        try:
            while True:
                head = cin.until(b"\r\n\r\n")
                method, path = head.split(b" ", 2)[:2]
                m, p = method.decode(), path.decode()
                headers = _headers(head)
                fault = self.rule(m, p)
                self.seen.append((m, p, fault.kind))
                if fault.kind == RESET:
                    _rst(client)
                    return
                if headers.get("expect", "").lower() == "100-continue":
                    client.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
                    head = b"\r\n".join(
                        line
                        for line in head.split(b"\r\n")
                        if not line.lower().startswith(b"expect:")
                    )
                body = _body(cin, headers, until_close=False)
                if fault.delay:
                    time.sleep(fault.delay)
                if upstream is None:
                    try:
                        upstream = socket.create_connection(
                            (self.upstream_host, self.upstream_port), timeout=120
                        )
                    except OSError:
                        _rst(client)  # the server is gone: as close to "refused" as we get
                        return
                    uin = _Conn(upstream)
                    with self._lock:
                        self._upstreams.add(upstream)
                assert uin is not None
                upstream.sendall(head + body)
                answer = uin.until(b"\r\n\r\n")
                while answer.split(b" ", 2)[1].startswith(b"1"):  # 100 Continue
                    answer = uin.until(b"\r\n\r\n")
                rheaders = _headers(answer)
                status = int(answer.split(b" ", 2)[1])
                no_body = m == "HEAD" or status in (204, 304)
                rbody = b"" if no_body else _body(uin, rheaders, until_close=True)
                if fault.on_answer is not None:
                    fault.on_answer()
                if fault.refuse:
                    self.refuse_for(fault.refuse)
                if fault.kind == DROP:
                    # The request was applied; its answer never arrives (and refusing began
                    # before the client can retry).
                    return
                client.sendall(answer + rbody)
                with self._lock:
                    if self._listener is None:
                        return  # refusing now: this connection goes too
                if "close" in rheaders.get("connection", "").lower():
                    return
        except (_Closed, OSError, ValueError, IndexError):
            return
        finally:
            with self._lock:
                self._clients.discard(client)
            _rst(client)
            if upstream is not None:
                with self._lock:
                    self._upstreams.discard(upstream)
                with contextlib.suppress(OSError):
                    upstream.close()

    def stop(self) -> None:
        self._stopped = True
        with self._lock:
            self._go_away()
        self._acceptor.join(timeout=5)
