"""Build, start and stop a local MinIO server (stdlib only; boto3 only to create buckets).

MinIO has no package in the registries, so it is built once from its Go module at a pinned
pseudo-version and cached under ``$FLOWLEDGER_CACHE`` (default ``~/.cache/flowledger``).
A started server is detached (own session) and described by ``<state_dir>/server.json`` so
another process can find it; it is stopped by PID.

    python -m infra.minio build
    python -m infra.minio start [--state-dir .minio] [--bucket NAME ...]
    python -m infra.minio env   [--state-dir .minio]     # prints `export K=V` lines
    python -m infra.minio spark-conf [--state-dir .minio]  # infra/spark-s3a.conf, rendered
    python -m infra.minio stop  [--state-dir .minio]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import secrets
import shlex
import shutil
import signal
import socket
import string
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from infra.cache import cache_root, file_lock

MINIO_MODULE = "github.com/minio/minio"
# The only version the Go module proxy lists for MinIO (`@latest` answers 404).
MINIO_VERSION = "v0.0.0-20260212201848-7aac2a2c5b7c"

DEFAULT_ACCESS_KEY = "flowledger"
DEFAULT_REGION = "us-east-1"
SERVER_JSON = "server.json"
START_TIMEOUT_S = 60.0
STOP_GRACE_S = 10.0


class MinioError(RuntimeError):
    """MinIO could not be built, started or stopped."""


@dataclass(frozen=True)
class MinioServer:
    endpoint: str
    access_key: str
    secret_key: str
    region: str
    data_dir: Path
    pid: int
    log_path: Path
    state_dir: Path

    @property
    def port(self) -> int:
        return int(self.endpoint.rsplit(":", 1)[1])

    def env(self) -> dict[str, str]:
        """The standard AWS variables that point a client at this server."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_REGION": self.region,
        }


# --- build -----------------------------------------------------------------------------------


def binary_path() -> Path:
    return cache_root() / "minio" / MINIO_VERSION / "minio"


def build(force: bool = False) -> Path:
    """Return the cached MinIO binary, building it with `go install` if it is missing."""
    target = binary_path()
    if target.is_file() and not force:
        return target
    go = shutil.which("go")
    if go is None:
        raise MinioError(
            "cannot build MinIO: the Go toolchain (`go`, >= 1.24) is not on PATH. "
            "Install Go from https://go.dev/dl/ (or your package manager) and retry, "
            f"or put a MinIO binary at {target}."
        )
    with file_lock(target.parent / ".build.lock"):
        if target.is_file() and not force:  # built by a concurrent caller while we waited
            return target
        # Install into a private directory, then rename: a half-built binary is never visible.
        gobin = target.parent / f".gobin-{os.getpid()}"
        shutil.rmtree(gobin, ignore_errors=True)
        env = dict(os.environ, GOBIN=str(gobin), GOFLAGS="-mod=mod")
        cmd = [go, "install", f"{MINIO_MODULE}@{MINIO_VERSION}"]
        print(f"building MinIO: {shlex.join(cmd)} (GOBIN={gobin})", file=sys.stderr, flush=True)
        started = time.monotonic()
        try:
            rc = subprocess.call(cmd, env=env)  # output streams to our stdout/stderr
            built = gobin / "minio"
            if rc != 0 or not built.is_file():
                raise MinioError(
                    f"`{shlex.join(cmd)}` failed (exit {rc}). It needs Go >= 1.24 and access to "
                    "the Go module proxy; see the output above."
                )
            os.replace(built, target)
        finally:
            shutil.rmtree(gobin, ignore_errors=True)
        print(f"built {target} in {time.monotonic() - started:.0f} s", file=sys.stderr)
    return target


# --- processes -------------------------------------------------------------------------------


def _port_free(port: int) -> bool:
    # MinIO listens with SO_REUSEPORT, so a second server on a taken port would start and share
    # it silently. A plain bind (without SO_REUSEPORT) fails while anything listens there.
    # SO_REUSEADDR, as MinIO's own listener has it: connections a stopped server left in
    # TIME_WAIT do not make the port taken (a server restarted on its port at once).
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _alive(pid: int) -> bool:
    child = _CHILDREN.get(pid)
    if child is not None:
        if child.poll() is None:
            return True
        del _CHILDREN[pid]
        return False
    with contextlib.suppress(ChildProcessError):
        if os.waitpid(pid, os.WNOHANG)[0] == pid:  # our own child that exited: reap it
            return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    stat = Path(f"/proc/{pid}/stat")
    with contextlib.suppress(OSError):
        # A zombie whose parent does not reap it still answers kill(0).
        return stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"
    return True


def _is_minio(pid: int) -> bool:
    """Guard against PID reuse: on Linux check the command line, elsewhere trust the PID."""
    cmdline = Path(f"/proc/{pid}/cmdline")
    try:
        return b"minio" in cmdline.read_bytes()
    except FileNotFoundError:
        return not Path("/proc/self").exists() and _alive(pid)
    except OSError:
        return True


def _log_tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


# Servers started by this process. Holding the Popen keeps it from warning "still running" when
# collected, and lets _alive() reap it: an orphan is only reaped if PID 1 does so.
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}


def _spawn(args: Sequence[str], env: dict[str, str], log_path: Path, cwd: Path) -> int:
    """Start a detached process (own session, output to the log) and return its PID."""
    with log_path.open("ab") as log:
        proc = subprocess.Popen(
            list(args),
            env=env,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    _CHILDREN[proc.pid] = proc
    return proc.pid


_API_LINE = re.compile(r"^API: (http://127\.0\.0\.1:[1-9][0-9]*)", re.MULTILINE)


def _logged_endpoint(log_path: Path) -> str | None:
    """The API address MinIO logs once it listens (how a port-0 bind is read back)."""
    try:
        found = _API_LINE.search(log_path.read_text(errors="replace"))
    except OSError:
        return None
    return found.group(1) if found else None


def _healthy(endpoint: str) -> bool:
    for probe in ("/minio/health/live", "/minio/health/ready"):
        try:
            with urllib.request.urlopen(endpoint + probe, timeout=2) as resp:
                if resp.status != 200:
                    return False
        except (urllib.error.URLError, OSError):
            return False
    return True


def new_secret_key() -> str:
    """A random root password for a throwaway server. MinIO reads a credential value that
    begins with "env" as a reference to somewhere else and then refuses to start ("Missing
    credential environment variable"), so the random part never comes first."""
    return "fl-" + secrets.token_urlsafe(24)


def _server_env(access_key: str, secret_key: str, region: str) -> dict[str, str]:
    # Never leak the caller's AWS profile/credentials or MinIO settings into the server.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "MINIO_"))}
    env.update(
        MINIO_ROOT_USER=access_key,
        MINIO_ROOT_PASSWORD=secret_key,
        MINIO_REGION=region,
        MINIO_BROWSER="off",  # no web console: starts faster, nothing to serve
        MINIO_UPDATE="off",
        MINIO_CI_CD="1",  # allow a data dir on the root drive, purge deleted data at once
    )
    return env


def create_buckets(server: MinioServer, buckets: Sequence[str]) -> None:
    if not buckets:
        return
    import boto3  # lazily: the rest of this module is stdlib only
    import botocore.session
    from botocore.config import Config

    # A bare botocore session with explicit settings: AWS_PROFILE & co. must not interfere.
    core = botocore.session.Session(session_vars={"profile": (None, None, None, None)})
    session = boto3.session.Session(botocore_session=core)
    s3 = session.client(
        "s3",
        endpoint_url=server.endpoint,
        aws_access_key_id=server.access_key,
        aws_secret_access_key=server.secret_key,
        region_name=server.region,
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 5}),
    )
    for bucket in buckets:
        with contextlib.suppress(s3.exceptions.BucketAlreadyOwnedByYou):
            s3.create_bucket(Bucket=bucket)


def _write_state(server: MinioServer) -> None:
    data = {k: str(v) if isinstance(v, Path) else v for k, v in asdict(server).items()}
    tmp = server.state_dir / f".{SERVER_JSON}.{os.getpid()}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # it holds the secret
    with os.fdopen(fd, "w") as fh:
        json.dump(data, fh, indent=2)
        fh.write("\n")
    os.replace(tmp, server.state_dir / SERVER_JSON)


def _read_state(state_dir: Path) -> MinioServer | None:
    try:
        data = json.loads((state_dir / SERVER_JSON).read_text())
        return MinioServer(
            endpoint=str(data["endpoint"]),
            access_key=str(data["access_key"]),
            secret_key=str(data["secret_key"]),
            region=str(data.get("region", DEFAULT_REGION)),
            data_dir=Path(data["data_dir"]),
            pid=int(data["pid"]),
            log_path=Path(data["log_path"]),
            state_dir=Path(data.get("state_dir", state_dir)),
        )
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise MinioError(f"unreadable {state_dir / SERVER_JSON}: {exc}") from exc


def load(state_dir: Path | str) -> MinioServer | None:
    """The server recorded in ``state_dir``, or None if there is none or it is not running."""
    server = _read_state(Path(state_dir))
    if server is None or not (_alive(server.pid) and _is_minio(server.pid)):
        return None
    return server


def start(
    state_dir: Path | str,
    port: int | None = None,
    buckets: Sequence[str] = (),
    access_key: str = DEFAULT_ACCESS_KEY,
    secret_key: str | None = None,
    region: str = DEFAULT_REGION,
    timeout: float = START_TIMEOUT_S,
) -> MinioServer:
    """Start MinIO on loopback with its data under ``state_dir`` and wait until it is healthy.

    If a server recorded in ``state_dir`` is still running (and on the requested port), it is
    reused: the buckets are created on it and it is returned.
    """
    state_dir = Path(state_dir).resolve()
    state_dir.mkdir(parents=True, exist_ok=True)
    running = load(state_dir)
    if running is not None:
        if port is not None and running.port != port:
            raise MinioError(
                f"MinIO already runs from {state_dir} on port {running.port} "
                f"(pid {running.pid}); stop it first"
            )
        create_buckets(running, buckets)
        return running
    (state_dir / SERVER_JSON).unlink(missing_ok=True)  # stale: its process is gone

    if port is not None and not _port_free(port):
        raise MinioError(f"port {port} on 127.0.0.1 is already in use")
    binary = binary_path()
    if not binary.is_file():
        raise MinioError(f"no MinIO binary at {binary}: run `python -m infra.minio build`")
    secret_key = secret_key or new_secret_key()
    data_dir = state_dir / "data"
    data_dir.mkdir(exist_ok=True)
    log_path = state_dir / "minio.log"
    env = _server_env(access_key, secret_key, region)

    # Without a port, MinIO binds port 0 itself and logs the address the kernel gave it: no
    # probe-then-bind race with other processes (a probed "free" port can be taken meanwhile,
    # and MinIO's SO_REUSEPORT would even share it silently with another MinIO).
    log_path.write_text("")
    args = [
        str(binary),
        "server",
        "--address",
        f"127.0.0.1:{port if port is not None else 0}",
        "--console-address",
        "127.0.0.1:0",  # MINIO_BROWSER=off: no console is served, but never a fixed port
        str(data_dir),
    ]
    started = time.monotonic()
    deadline = started + timeout
    pid = _spawn(args, env, log_path, state_dir)
    endpoint = f"http://127.0.0.1:{port}" if port is not None else None
    while time.monotonic() < deadline and _alive(pid):
        if endpoint is None:
            endpoint = _logged_endpoint(log_path)
        if endpoint is not None and _healthy(endpoint):
            break
        time.sleep(0.1)
    if endpoint is None or not (_alive(pid) and _healthy(endpoint)):
        _terminate(pid)
        reason = "exited" if time.monotonic() < deadline else f"not healthy after {timeout:.0f} s"
        raise MinioError(
            f"MinIO {reason} ({shlex.join(args)}); log {log_path}:\n{_log_tail(log_path)}"
        )
    server = MinioServer(
        endpoint=endpoint,
        access_key=access_key,
        secret_key=secret_key,
        region=region,
        data_dir=data_dir,
        pid=pid,
        log_path=log_path,
        state_dir=state_dir,
    )
    _write_state(server)
    try:
        create_buckets(server, buckets)
    except Exception:
        stop(server)
        raise
    return server


def _terminate(pid: int, grace: float = STOP_GRACE_S) -> None:
    if not _alive(pid):
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if not _alive(pid):
            return
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    if _alive(pid):
        raise MinioError(f"MinIO (pid {pid}) survived SIGKILL")


def stop(server_or_state_dir: MinioServer | Path | str) -> bool:
    """Stop a server (SIGTERM, SIGKILL after 10 s) and forget it. True if one was running."""
    if isinstance(server_or_state_dir, MinioServer):
        server: MinioServer | None = server_or_state_dir
    else:
        server = _read_state(Path(server_or_state_dir))
    if server is None:
        return False
    was_running = _alive(server.pid) and _is_minio(server.pid)
    if was_running:
        _terminate(server.pid)
    recorded = _read_state(server.state_dir)
    if recorded is not None and recorded.pid == server.pid:
        (server.state_dir / SERVER_JSON).unlink(missing_ok=True)
    return was_running


def spark_conf(server: MinioServer) -> str:
    """``infra/spark-s3a.conf`` rendered for ``server`` (a spark-defaults.conf for s3a)."""
    template = string.Template(Path(__file__).with_name("spark-s3a.conf").read_text())
    return template.safe_substitute({**os.environ, "HOME": str(Path.home()), **server.env()})


# --- CLI -------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m infra.minio", description="Build, start and stop a local MinIO server."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p_build = sub.add_parser("build", help="build and cache the pinned MinIO binary")
    p_build.add_argument("--force", action="store_true", help="rebuild even if cached")
    p_start = sub.add_parser("start", help="start a detached MinIO server")
    p_start.add_argument(
        "--port", type=int, default=None, help="API port (default: one the kernel picks)"
    )
    p_start.add_argument("--bucket", action="append", default=[], help="bucket to create")
    p_start.add_argument("--access-key", default=DEFAULT_ACCESS_KEY)
    p_start.add_argument("--secret-key", default=None, help="default: random")
    for name, help_ in (
        ("stop", "stop the server"),
        ("env", "print `export` lines for the shell"),
        ("spark-conf", "print infra/spark-s3a.conf rendered for the server"),
    ):
        sub.add_parser(name, help=help_)
    for p in sub.choices.values():
        if p is not p_build:
            p.add_argument("--state-dir", type=Path, default=Path(".minio"))
    args = parser.parse_args(argv)

    try:
        if args.command == "build":
            print(build(force=args.force))
        elif args.command == "start":
            t0 = time.monotonic()
            existing = load(args.state_dir)
            server = start(
                args.state_dir,
                port=args.port,
                buckets=args.bucket,
                access_key=args.access_key,
                secret_key=args.secret_key,
            )
            status = "already running" if existing else f"ready in {time.monotonic() - t0:.1f} s"
            print(
                f"MinIO {server.endpoint} pid {server.pid} {status}"
                f'; shell: eval "$(python -m infra.minio env --state-dir {args.state_dir})"'
            )
        elif args.command == "stop":
            stopped = stop(args.state_dir)
            print("MinIO stopped" if stopped else f"no MinIO running from {args.state_dir}")
        else:  # env, spark-conf
            found = load(args.state_dir)
            if found is None:
                print(f"no MinIO running from {args.state_dir}", file=sys.stderr)
                return 1
            if args.command == "spark-conf":
                print(spark_conf(found), end="")
            else:
                for key, value in found.env().items():
                    print(f"export {key}={shlex.quote(value)}")
    except (MinioError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
