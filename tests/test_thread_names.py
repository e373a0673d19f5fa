"""Every thread the project starts carries a `flowledger-` name, which the check after each
test tells project threads by (tests/support/thread_leaks.py); the scan that finds unnamed
ones, tested on planted examples."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.thread_names import thread_sites

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[1]


def test_every_project_thread_is_named_for_the_leak_check() -> None:
    """The check after each test tells the project's threads by their `flowledger-` name
    (tests/support/thread_leaks.py): a thread or pool without one would leak unseen."""
    found = thread_sites(ROOT)
    assert found == [], "threads started without a flowledger- name:\n" + "\n".join(found)


def test_thread_name_scan_finds_unnamed_threads(tmp_path: Path) -> None:
    """The scan itself: each way of starting a thread unnamed is found; named ones are not."""
    pkg = tmp_path / "storage"
    pkg.mkdir()
    (pkg / "t.py").write_text(
        "import threading\n"
        "from concurrent.futures import ThreadPoolExecutor\n"
        "def f(x):\n"
        "    threading.Thread(target=f)\n"
        "    threading.Thread(target=f, name='flowledger-ok')\n"
        "    threading.Thread(target=f, name=f'flowledger-{x}')\n"
        "    threading.Thread(target=f, name='worker')\n"
        "    ThreadPoolExecutor(4)\n"
        "    ThreadPoolExecutor(4, 'flowledger-pool')\n"
        "    ThreadPoolExecutor(4, thread_name_prefix='flowledger-pool')\n"
        "    threading.Timer(1, f)\n"
        "def g():\n"
        "    t = threading.Timer(1, g)\n"
        "    t.name = 'flowledger-timer'\n"
        "    u = threading.Timer(1, g)\n"
        "class T(threading.Thread):\n"
        "    def __init__(self):\n"
        "        super().__init__(daemon=True)\n"
        "class U(threading.Thread):\n"
        "    def __init__(self):\n"
        "        super().__init__(name='flowledger-u')\n"
    )
    found = [line.split("/", 1)[1] for line in thread_sites(tmp_path)]
    assert found == [
        "t.py:4: Thread(...)",
        "t.py:7: Thread(...)",
        "t.py:8: ThreadPoolExecutor(...)",
        "t.py:11: Timer(...)",
        "t.py:15: Timer(...)",
        "t.py:18: __init__(...)",
    ]
