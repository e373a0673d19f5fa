"""`flowledger serve` as a real server process on a free port, and a small HTTP client."""

from __future__ import annotations

import http.client
import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from provenance import ProvenanceEvent, ProvenanceRepository
from storage import open_store
from storage.content import ContentRepository

TOKEN = "test-token-0123456789abcdef"
_BOUND = re.compile(r"serving on http://([0-9.]+):(\d+)")


@dataclass
class Answer:
    status: int
    headers: Mapping[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


class Client:
    def __init__(self, host: str, port: int, token: str | None = TOKEN) -> None:
        self.host, self.port, self.token = host, port, token

    @property
    def base(self) -> str:
        return f"http://{self.host}:{self.port}"

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        raw: bytes | None = None,
        headers: Mapping[str, str] | None = None,
        token: str | None = "",
        timeout: float = 60,
    ) -> Answer:
        h = dict(headers or {})
        tok = self.token if token == "" else token
        if tok:
            h["Authorization"] = f"Bearer {tok}"
        data = raw
        if body is not None:
            data = json.dumps(body).encode()
            h.setdefault("Content-Type", "application/json")
        conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        try:
            conn.request(method, path, body=data, headers=h)
            resp = conn.getresponse()
            return Answer(resp.status, dict(resp.headers.items()), resp.read())
        finally:
            conn.close()

    def get(self, path: str, **kw: Any) -> Answer:
        return self.request("GET", path, **kw)

    def post(self, path: str, body: Any = None, **kw: Any) -> Answer:
        return self.request("POST", path, body, **kw)


class ServiceProcess:
    """`python -m flowledger serve --port 0`; the port is read from the line it prints."""

    def __init__(
        self,
        repo: str,
        env: Mapping[str, str] | None = None,
        args: tuple[str, ...] = (),
        code: Path | None = None,
        nofile: int | None = None,
    ) -> None:
        """`code`: another code tree to run (e.g. a `git archive` of older code; benchmarks);
        `nofile`: the server's file descriptor limit (soft and hard)."""
        full = {**os.environ, "FLOWLEDGER_TOKEN": TOKEN, **(env or {})}
        full = {k: v for k, v in full.items() if v}
        root = str(code or Path(__file__).resolve().parents[2])
        full["PYTHONPATH"] = root + os.pathsep + full.get("PYTHONPATH", "")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "flowledger", "serve", "--repo", repo, "--port", "0", *args],
            cwd=root if code else None,  # `-m` puts the working directory first on sys.path
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=full,
            text=True,
            preexec_fn=None if nofile is None else lambda: _limit_fds(nofile),
        )
        self.output: list[str] = []
        found: list[tuple[str, int]] = []
        ready = threading.Event()

        def pump() -> None:
            assert self.proc.stdout is not None
            for line in self.proc.stdout:
                self.output.append(line)
                m = _BOUND.search(line)
                if m and not found:
                    found.append((m.group(1), int(m.group(2))))
                    ready.set()
            ready.set()

        self._pump = threading.Thread(target=pump, daemon=True)
        self._pump.start()
        if not ready.wait(60) or not found:
            self.stop()
            raise RuntimeError("flowledger serve did not start:\n" + "".join(self.output))
        self.host, self.port = found[0]
        self.client = Client(self.host, self.port)
        for _ in range(600):
            try:
                if self.client.get("/health", token=None).status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.05)
        self.stop()
        raise RuntimeError("flowledger serve never answered /health:\n" + "".join(self.output))

    @property
    def log(self) -> str:
        return "".join(self.output)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._pump.join(10) if hasattr(self, "_pump") else None
        if self.proc.stdout is not None:  # the pipe we opened: ours to close once read out
            self.proc.stdout.close()


def _limit_fds(n: int) -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_NOFILE, (n, n))


def seed_lineage(repo: str) -> None:
    """A small lineage: ff-1 received with content, forked into ff-2 and ff-3, ff-2 dropped."""
    with ContentRepository.open(repo) as content:
        claim = content.write_bytes(b"a,b\n1,2\n")
        content.commit()
    rc = claim.resource_claim
    with ProvenanceRepository.open(open_store(repo)) as prov:
        prov.register_events(
            [
                ProvenanceEvent(
                    "RECEIVE",
                    "ff-1",
                    "in",
                    "GetFile",
                    claim.length,
                    transit_uri="file:///a",
                    updated_attributes={"filename": "a.csv"},
                    content_claim_container=rc.container,
                    content_claim_section=rc.section,
                    content_claim_identifier=rc.identifier,
                    content_claim_offset=claim.offset,
                    content_claim_checksum=claim.checksum,
                ),
                ProvenanceEvent(
                    "FORK", "ff-1", "split", "SplitText", 10, child_uuids=("ff-2", "ff-3")
                ),
                ProvenanceEvent("DROP", "ff-2", "out", "Drop", 5),
            ],
            sync=True,
        )
