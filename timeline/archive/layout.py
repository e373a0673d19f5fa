"""Where archival keeps its objects under a table root (see docs/archival.md).

_timeline/archive.manifest                      CAS: archive files, archived seqs, pending run
_timeline/archive/<min>_<max>_<nonce>.avro      one Avro container file per run (or merge)
_timeline/archive/archive-<nonce>.plan          plan of an archival run (create-only)
_timeline/archive/merge-<nonce>.plan            plan of a merge (create-only)
_timeline/archive_checkpoints/<nonce>.json      archived entries the table state folds
"""

from __future__ import annotations

import re

from ..layout import TIMELINE

ARCHIVE = TIMELINE + "archive/"
MANIFEST = TIMELINE + "archive.manifest"
CHECKPOINTS = TIMELINE + "archive_checkpoints/"

_FILE_RE = re.compile(r"^(\d{17})_(\d{17})_([0-9a-f]+)\.avro$")


def archive_file_key(min_time: str, max_time: str, nonce: str) -> str:
    return f"{ARCHIVE}{min_time}_{max_time}_{nonce}.avro"


def parse_archive_key(key: str) -> tuple[str, str, str] | None:
    """(min_time, max_time, nonce) of an archive file key, None if it is not one."""
    m = _FILE_RE.match(key[len(ARCHIVE) :] if key.startswith(ARCHIVE) else key)
    return (m.group(1), m.group(2), m.group(3)) if m else None


def plan_key(kind: str, nonce: str) -> str:
    return f"{ARCHIVE}{kind}-{nonce}.plan"


def checkpoint_key(nonce: str) -> str:
    return f"{CHECKPOINTS}{nonce}.json"
