"""Reads a keyed table's snapshot in a fresh process and prints its rows as one JSON list
(the rows as tests/support/keyed_model.py states them), for the life test's reopen rule.

    FLOWLEDGER_LIFE_STORE='{"uri": ..., "settings": {...}}' python -m tests.support.life_reader

The store settings travel in the environment, not the command line (they hold credentials).
"""

from __future__ import annotations

import json
import os

from storage import StoreSettings, open_store
from tests.support.keyed_model import table_rows
from timeline import Table, TableSettings


def main() -> None:
    spec = json.loads(os.environ["FLOWLEDGER_LIFE_STORE"])
    store = open_store(spec["uri"], StoreSettings(**spec["settings"]))
    try:
        table = Table.open(store, TableSettings(local_entry_cache=False))
        print(json.dumps(table_rows(table.read())))
    finally:
        store.close()


if __name__ == "__main__":
    main()
