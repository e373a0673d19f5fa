"""Issue 14's acceptance as a test: seams are public, packages have no import circles."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.architecture_scan import scan

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[1]


def test_no_module_reads_another_modules_private_names() -> None:
    reach_ins, _ = scan(ROOT)
    assert reach_ins == [], "private names read from another module:\n" + "\n".join(reach_ins)


def test_no_import_cycles_inside_a_package() -> None:
    _, cycles = scan(ROOT)
    assert cycles == [], f"import cycles (only TYPE_CHECKING imports may close a loop): {cycles}"


def test_scan_finds_a_planted_reach_in_and_cycle(tmp_path: Path) -> None:
    """The scan itself works: a private read and a two-module circle are reported."""
    pkg = tmp_path / "storage"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from . import b\n\ndef f(x):\n    return x._secret\n")
    (pkg / "b.py").write_text("from typing import TYPE_CHECKING\n\ndef g():\n    from . import a\n")
    (pkg / "c.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import a\n"
    )
    reach_ins, cycles = scan(tmp_path)
    assert reach_ins == ["storage/a.py:4: ._secret"]
    assert cycles == [["storage.a", "storage.b"]]


@pytest.mark.parametrize(
    ("package", "above"),
    [
        ("storage", ("timeline", "provenance", "flowledger")),
        ("timeline", ("provenance", "flowledger")),
        ("provenance", ("flowledger",)),
    ],
)
def test_layers_point_one_way(package: str, above: tuple[str, ...]) -> None:
    """flowledger -> provenance -> timeline -> storage: importing a layer loads none above it."""
    code = f"import sys, {package}; print(sorted(m for m in {above!r} if m in sys.modules))"
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"
