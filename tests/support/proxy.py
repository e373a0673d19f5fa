"""An HTTP proxy in front of a real S3 server that injects the faults real networks have.

Rules decide per request: forward it, forward it but drop the response (the write lands, the
client sees a broken connection), answer 503 without forwarding, or strip the conditional
headers (an endpoint that ignores If-None-Match / If-Match).
"""

from __future__ import annotations

import http.client
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

FORWARD = "forward"
DROP_RESPONSE = "drop-response"
FAIL_503 = "503"
STRIP_CONDITIONS = "strip-conditions"

Rule = Callable[[str, str, dict[str, str]], str]


@dataclass
class FaultProxy:
    upstream: str
    rule: Rule = field(default=lambda method, path, headers: FORWARD)
    seen: list[tuple[str, str, str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        up = urlsplit(self.upstream)
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                headers = {k: v for k, v in self.headers.items()}
                action = proxy.rule(self.command, self.path, headers)
                proxy.seen.append((self.command, self.path, action))
                if action == FAIL_503:
                    msg = b"<Error><Code>SlowDown</Code><Message>injected</Message></Error>"
                    self.send_response(503)
                    self.send_header("Content-Length", str(len(msg)))
                    self.end_headers()
                    self.wfile.write(msg)
                    return
                if action == STRIP_CONDITIONS:
                    headers = {
                        k: v
                        for k, v in headers.items()
                        if k.lower() not in ("if-none-match", "if-match")
                    }
                conn = http.client.HTTPConnection(up.hostname, up.port, timeout=30)
                conn.request(self.command, self.path, body=body, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
                conn.close()
                if action == DROP_RESPONSE:
                    self.close_connection = True
                    self.connection.shutdown(2)  # the request landed; the client never knows
                    return
                self.send_response(resp.status)
                for k, v in resp.getheaders():
                    if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _handle

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.endpoint = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
