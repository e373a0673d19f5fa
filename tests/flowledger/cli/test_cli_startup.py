"""What a CLI command pays before it does anything: the modules it imports."""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.unit
def test_the_cli_starts_without_importing_pandas() -> None:
    """pyarrow imports pandas (0.3-0.4 s) on the first Arrow array or scalar a process
    builds; one built at import time in any module the CLI loads made every command pay it."""
    probe = "import sys, flowledger.cli; print('pandas' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.strip() == "False", out.stderr
