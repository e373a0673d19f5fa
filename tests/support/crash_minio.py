"""A MinIO of a test's own that can be SIGKILLed by its PID and restarted on the same data
folder (and port), behind a `FaultProxy` so that the client keeps one endpoint throughout."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

from infra import minio as infra_minio
from tests.support.fault_proxy import FaultProxy
from tests.support.servers import S3Endpoint


class CrashingMinio:
    def __init__(self, state_dir: Path) -> None:
        self.state_dir = state_dir
        self.server = infra_minio.start(state_dir)
        self.proxy = FaultProxy("127.0.0.1", self.server.port)
        self.kills = 0
        self.same_port = True

    @property
    def endpoint(self) -> S3Endpoint:
        """Through the proxy: what the code under test talks to."""
        s = self.server
        return S3Endpoint("minio", self.proxy.endpoint, s.access_key, s.secret_key, s.region)

    @property
    def direct(self) -> S3Endpoint:
        """MinIO itself (for checking what landed, past every fault)."""
        s = self.server
        return S3Endpoint("minio", s.endpoint, s.access_key, s.secret_key, s.region)

    def kill(self) -> None:
        """SIGKILL: no shutdown, whatever was in flight is cut."""
        os.kill(self.server.pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while infra_minio.load(self.state_dir) is not None and time.monotonic() < deadline:
            time.sleep(0.01)  # load() reaps our child and says whether it still runs
        self.kills += 1

    def restart(self) -> None:
        """Start MinIO again on the same data folder and port (on another port only if
        something else took it meanwhile), and point the proxy at it."""
        old = self.server
        keys = {"access_key": old.access_key, "secret_key": old.secret_key, "region": old.region}
        try:
            self.server = infra_minio.start(self.state_dir, port=old.port, **keys)
            self.same_port = True
        except infra_minio.MinioError:
            self.server = infra_minio.start(self.state_dir, **keys)
            self.same_port = False
        self.proxy.upstream_port = self.server.port

    def crash_for(self, seconds: float) -> threading.Thread:
        """Kill MinIO now and restart it after `seconds`; connections are refused meanwhile.
        Returns the thread that restarts it (join it before checking the result)."""
        back = threading.Event()
        self.proxy.refuse_until(back)
        self.kill()

        def later() -> None:
            time.sleep(seconds)
            self.restart()
            back.set()

        t = threading.Thread(target=later, daemon=True)
        t.start()
        return t

    def stop(self) -> None:
        self.proxy.stop()
        infra_minio.stop(self.server)
