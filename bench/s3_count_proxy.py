"""A counting reverse proxy in front of one S3 server, for benchmarks that compare clients
written in other languages (Rust, the JVM, the AWS C++ SDK under pyarrow) whose calls cannot be
counted in-process.

Every request is forwarded unchanged — the Host header included, so SigV4 signatures still
verify — on a keep-alive connection per client connection; the proxy answers
`Expect: 100-continue` itself (http.server does) and records per request the time window,
method, kind (GET / LIST / HEAD / PUT / POST / DELETE), status and the bytes in each direction.
A benchmark reads `records` and sums them over the time window of each step.
"""

from __future__ import annotations

import http.client
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

# Hop-by-hop headers (RFC 9110 7.6.1) and the ones this proxy re-frames itself.
_REQUEST_DROP = {"connection", "keep-alive", "proxy-connection", "te", "trailer", "upgrade",
                 "expect", "transfer-encoding", "content-length"}  # fmt: skip
_RESPONSE_DROP = {"connection", "keep-alive", "transfer-encoding", "content-length"}
_CHUNK = 1 << 20


@dataclass(frozen=True)
class Request:
    start: float  # time.time() when the request line arrived
    end: float
    method: str
    kind: str  # GET, LIST, HEAD, PUT, POST, DELETE
    status: int
    bytes_up: int  # request body
    bytes_down: int  # response body


@dataclass(frozen=True)
class Counts:
    """What a set of requests amounts to."""

    total: int
    by_kind: dict[str, int]
    errors: dict[int, int]  # status >= 400 -> count (404s of existence probes, 412 conflicts)
    bytes_up: int
    bytes_down: int

    def short(self) -> str:
        return " ".join(f"{k}={v}" for k, v in sorted(self.by_kind.items()))


def kind_of(method: str, target: str) -> str:
    """Path-style target `/bucket/key?query`: a GET without a key lists the bucket."""
    parts = urlsplit(target)
    key = parts.path.lstrip("/").partition("/")[2]
    if method == "GET" and not key and "location" not in parts.query:
        return "LIST"
    return method


def count(records: Iterable[Request]) -> Counts:
    kinds: Counter[str] = Counter()
    errors: Counter[int] = Counter()
    up = down = 0
    for r in records:
        kinds[r.kind] += 1
        if r.status >= 400:
            errors[r.status] += 1
        up += r.bytes_up
        down += r.bytes_down
    return Counts(sum(kinds.values()), dict(kinds), dict(errors), up, down)


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        """A client that drops its connection is no error of the proxy's; the rest is."""
        if not isinstance(sys.exc_info()[1], ConnectionError | TimeoutError):
            super().handle_error(request, client_address)  # type: ignore[arg-type]


class CountingProxy:
    """`CountingProxy(upstream)` listens on a free loopback port (`endpoint`) until `stop()`."""

    def __init__(self, upstream: str) -> None:
        up = urlsplit(upstream)
        if up.hostname is None or up.port is None:
            raise ValueError(f"upstream needs host and port: {upstream}")
        host, port = up.hostname, up.port
        self.records: list[Request] = []
        lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, and 100-continue answered for us
            upstream_conn: http.client.HTTPConnection | None = None

            def log_message(self, format: str, *args: object) -> None:
                pass

            def finish(self) -> None:
                super().finish()
                if self.upstream_conn is not None:  # the client left: so does our connection
                    self.upstream_conn.close()

            def _body(self) -> bytes:
                if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
                    out = bytearray()
                    while True:
                        size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                        if size == 0:
                            while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                                pass  # trailers
                            return bytes(out)
                        out += self.rfile.read(size)
                        self.rfile.readline()
                length = int(self.headers.get("Content-Length") or 0)
                return self.rfile.read(length) if length else b""

            def _forward(self, body: bytes) -> http.client.HTTPResponse:
                for attempt in (0, 1):
                    if self.upstream_conn is None:
                        self.upstream_conn = http.client.HTTPConnection(host, port, timeout=300)
                    conn = self.upstream_conn
                    try:
                        conn.putrequest(
                            self.command, self.path, skip_host=True, skip_accept_encoding=True
                        )
                        for k, v in self.headers.items():
                            if k.lower() not in _REQUEST_DROP:
                                conn.putheader(k, v)
                        if body or self.command in ("PUT", "POST"):
                            conn.putheader("Content-Length", str(len(body)))
                        conn.endheaders(body or None)
                        return conn.getresponse()
                    except (ConnectionError, http.client.HTTPException):
                        # A keep-alive connection the server closed while idle: one fresh try.
                        conn.close()
                        self.upstream_conn = None
                        if attempt:
                            raise
                raise AssertionError("unreachable")

            def _handle(self) -> None:
                start = time.time()
                body = self._body()
                resp = self._forward(body)
                sent = [0]
                try:
                    self._answer(resp, sent)
                except (ConnectionError, TimeoutError):
                    # The client left mid-answer (s3a aborts a stream it seeks away from): the
                    # request still counts; our upstream connection has unread bytes, so it goes.
                    self.close_connection = True
                    if self.upstream_conn is not None:
                        self.upstream_conn.close()
                        self.upstream_conn = None
                rec = Request(start, time.time(), self.command, kind_of(self.command, self.path),
                              resp.status, len(body), sent[0])  # fmt: skip
                with lock:
                    proxy.records.append(rec)

            def _answer(self, resp: http.client.HTTPResponse, sent: list[int]) -> None:
                self.send_response_only(resp.status, resp.reason)
                for k, v in resp.getheaders():
                    if k.lower() not in _RESPONSE_DROP:
                        self.send_header(k, v)
                if self.command == "HEAD" or resp.status in (204, 304):
                    length = resp.getheader("Content-Length")
                    if length is not None:
                        self.send_header("Content-Length", length)
                    self.end_headers()
                    resp.read()
                elif resp.getheader("Content-Length") is not None:
                    self.send_header("Content-Length", resp.getheader("Content-Length", "0"))
                    self.end_headers()
                    while piece := resp.read(_CHUNK):
                        self.wfile.write(piece)
                        sent[0] += len(piece)
                else:  # chunked upstream answer: small (listings, errors); re-framed whole
                    data = resp.read()
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    sent[0] = len(data)
                if resp.will_close and self.upstream_conn is not None:
                    self.upstream_conn.close()
                    self.upstream_conn = None

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _handle

        self._server = _QuietServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        self._lock = lock

    def between(self, start: float, end: float) -> Counts:
        """The requests that arrived inside [start, end] (unix times)."""
        with self._lock:
            records = [r for r in self.records if start <= r.start <= end]
        return count(records)

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
