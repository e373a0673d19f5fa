"""A real Spark standalone cluster on loopback: a master and two workers started from
PySpark's own `spark-class`, each worker with 1 core and 512 MiB, so executors run in JVMs
and Python workers of their own, never in the test's or the driver's process.

The cluster knows nothing of flowledger's settings: a driver reaches S3 and gets the s3a jars
the way a user's application does (`spark.hadoop.*` and `spark.jars` in its session conf).
The workers' environment is what a user's cluster has installed: this interpreter for
PySpark's Python workers, and flowledger importable (`PYTHONPATH`, as the package would be).
Processes are started in sessions of their own and stopped by PID.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyspark

WORKER_CORES = 1
WORKER_MEMORY = "512m"
START_TIMEOUT_S = 120


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Cluster:
    master_url: str
    ui_url: str
    logs: Path
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def alive_workers(self) -> int:
        with urllib.request.urlopen(f"{self.ui_url}/json/", timeout=5) as r:
            state = json.loads(r.read())
        return sum(1 for w in state.get("workers", []) if w.get("state") == "ALIVE")

    def log_tail(self) -> str:
        return "\n".join(
            f"== {p.name}\n" + p.read_text(errors="replace")[-3000:]
            for p in self.logs.glob("*.log")
        )


def _spark_class() -> tuple[Path, Path]:
    home = Path(pyspark.__file__).parent
    return home, home / "bin" / "spark-class"


def _start(args: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    _, spark_class = _spark_class()
    with log.open("wb") as out:
        proc = subprocess.Popen(
            ["bash", str(spark_class), *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=log.parent,
            start_new_session=True,  # its own process group: stopped with everything it started
        )
    return proc


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """Stop the process group `proc` leads (SIGTERM, then SIGKILL after 20 s) and reap `proc`:
    an unreaped child is a ResourceWarning, which the tests treat as an error, and a reaped
    leader is how we know the group's JVM is gone (`spark-class` execs it)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=20)
    with contextlib.suppress(ProcessLookupError):  # anything else the group still holds
        os.killpg(proc.pid, signal.SIGKILL)


@contextmanager
def standalone_cluster(root: Path, pythonpath: str, workers: int = 2) -> Iterator[Cluster]:
    """Start a master and `workers` workers; stop them (by PID) on exit."""
    home, _ = _spark_class()
    root.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "SPARK_HOME": str(home),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_DAEMON_MEMORY": "256m",
        "SPARK_LOG_DIR": str(root),
        "PYSPARK_PYTHON": sys.executable,
        "PYTHONPATH": pythonpath,
    }
    # The workers must not get S3 from the test's environment: only the application's conf.
    for name in [k for k in env if k.startswith("AWS_")]:
        del env[name]
    port, ui = free_port(), free_port()
    cluster = Cluster(f"spark://127.0.0.1:{port}", f"http://127.0.0.1:{ui}", root)
    try:
        cluster.procs.append(
            _start(
                [
                    "org.apache.spark.deploy.master.Master",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(port),
                    "--webui-port",
                    str(ui),
                ],
                root / "master.log",
                env,
            )
        )
        _wait(cluster, lambda: cluster.alive_workers() >= 0)
        for k in range(workers):
            work = root / f"worker{k}"
            work.mkdir(exist_ok=True)
            cluster.procs.append(
                _start(
                    [
                        "org.apache.spark.deploy.worker.Worker",
                        "--host",
                        "127.0.0.1",
                        "--port",
                        str(free_port()),
                        "--webui-port",
                        str(free_port()),
                        "--cores",
                        str(WORKER_CORES),
                        "--memory",
                        WORKER_MEMORY,
                        "--work-dir",
                        str(work),
                        cluster.master_url,
                    ],
                    root / f"worker{k}.log",
                    env,
                )
            )
        _wait(cluster, lambda: cluster.alive_workers() == workers)
        yield cluster
    finally:
        for proc in reversed(cluster.procs):
            _stop(proc)


def _wait(cluster: Cluster, ready: object) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    last = "no answer yet"
    while time.monotonic() < deadline:
        try:
            if ready():  # type: ignore[operator]
                return
        except urllib.error.HTTPError as exc:
            # The UI answers errors while it starts; the error holds the response's socket,
            # which must be closed here, not by the garbage collector in a later test.
            exc.close()
            last = str(exc)
        except OSError as exc:
            last = str(exc)  # the message only: the traceback would keep its frames alive
        time.sleep(0.5)
    raise RuntimeError(f"the standalone cluster did not start ({last}):\n{cluster.log_tail()}")


def driver_session(args: dict[str, Any]) -> Any:
    """The session a cluster driver (tests/support/*_cluster_driver.py) opens on the cluster
    `args["master"]` names, through `flowledger.spark.session`, with the s3a settings and jars
    the test passes: 2 executors of 1 core and 512 MiB, on loopback."""
    import flowledger.spark as fs

    conf = {
        "spark.jars": ",".join(args["jars"]),
        **args["s3a"],
        "spark.executor.memory": WORKER_MEMORY,
        "spark.executor.cores": str(WORKER_CORES),
        "spark.cores.max": "2",
        "spark.driver.memory": "512m",
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.sql.shuffle.partitions": "2",
        "spark.default.parallelism": "2",
        "spark.ui.enabled": "false",
        "spark.flowledger.keyed.driverWriteThreshold": "-1",  # the executors write
    }
    spark = fs.session(repo=args["repo"], master=args["master"], conf=conf)
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def executors_of(spark: Any) -> int:
    """Executors registered with the driver (the driver's own block manager left out)."""
    return int(spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size()) - 1
