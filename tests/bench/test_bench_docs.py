"""docs/benchmarks.md stays honest about `bench/`: every command it shows runs a module that
exists, and every benchmark that can be run (a module with a `main`) has its section."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "benchmarks.md"
#: `python -m bench NAME ...` and `python -m bench.NAME ...`; placeholders are upper case.
COMMAND = re.compile(r"python -m bench(?:\.| +)([a-z][a-z0-9_]*)")


def runnable_modules() -> list[str]:
    """Modules of `bench/` with a module-level `main` (the package's own runner aside)."""
    out = []
    for path in sorted((ROOT / "bench").glob("*.py")):
        if path.stem.startswith("__"):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        if any(isinstance(n, ast.FunctionDef) and n.name == "main" for n in tree.body):
            out.append(path.stem)
    return out


def test_every_command_on_the_page_names_a_bench_module() -> None:
    named = set(COMMAND.findall(PAGE.read_text(encoding="utf-8")))
    assert named, "no `python -m bench` command found on the page"
    gone = sorted(n for n in named if not (ROOT / "bench" / f"{n}.py").is_file())
    assert gone == [], f"docs/benchmarks.md runs modules that do not exist: {gone}"


def test_every_runnable_bench_module_appears_on_the_page() -> None:
    page = PAGE.read_text(encoding="utf-8")
    modules = runnable_modules()
    assert "upsert" in modules  # the scan itself finds the benchmarks
    absent = [
        m for m in modules if f"bench/{m}.py" not in page and m not in set(COMMAND.findall(page))
    ]
    assert absent == [], f"bench modules with a main but no place on docs/benchmarks.md: {absent}"


def test_the_command_pattern_reads_both_spellings_and_skips_placeholders() -> None:
    text = "`python -m bench upsert --quick`, `python -m bench.spark -n 3`, `python -m bench NAME`"
    assert COMMAND.findall(text) == ["upsert", "spark"]
