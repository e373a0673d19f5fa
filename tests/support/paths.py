"""Where the checkout is, for tests that run commands in it."""

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
