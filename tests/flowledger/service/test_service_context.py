"""What a service process holds is built at startup from its settings and closed at shutdown
(flowledger/service/state.py), never read from module globals."""

from __future__ import annotations

from pathlib import Path

import pytest

from flowledger.service import ServiceSettings
from flowledger.service.state import Services

pytestmark = pytest.mark.unit


def test_the_archival_switch_reaches_the_services_repository(tmp_path: Path) -> None:
    """`flowledger --no-auto-archive serve` hands the switch over in ServiceSettings; two
    services in one process each keep their own."""
    uri = str(tmp_path / "repo")
    off = Services(uri, ServiceSettings(token="t" * 16, auto_archive=False))
    on = Services(uri, ServiceSettings(token="t" * 16))
    try:
        assert off.prov.settings.table.archival.auto_archive is False
        assert on.prov.settings.table.archival.auto_archive is True
    finally:
        off.close()
        on.close()
