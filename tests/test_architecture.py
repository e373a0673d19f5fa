"""The package structure as a test: seams are public, packages have no import circles, and no
text in the repository cites the project's bookkeeping (issue, session or round numbers) or a
document outside the repository."""

from __future__ import annotations

import ast
import importlib
import re
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

import pytest

from tests.support.architecture_scan import scan
from tests.support.module_state import scan_module_state

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


def test_no_module_level_mutable_state() -> None:
    """Containers, executors, locks and caches belong to an object its creator closes, never
    to a module: module state outlives its users and leaks between two uses in one process
    (tests/support/module_state.py says what counts)."""
    found = scan_module_state(ROOT)
    assert found == [], "module-level mutable state:\n" + "\n".join(found)


def test_module_state_scan_finds_planted_state(tmp_path: Path) -> None:
    """The scan itself: each kind of module state is found; constants are not."""
    pkg = tmp_path / "storage"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("__all__ = ['a']\n")
    (pkg / "state.py").write_text(
        "import functools, threading\n"
        "from collections import OrderedDict\n"
        "from concurrent.futures import ThreadPoolExecutor\n"
        "from dataclasses import dataclass\n"
        "class Box:\n    pass\n"
        "SEEN = {}\n"
        "NAMES: list[str] = [x for x in 'ab']\n"
        "LRU = OrderedDict()\n"
        "POOL = ThreadPoolExecutor(4)\n"
        "LOCK = threading.Lock()\n"
        "BOX = Box()\n"
        "@functools.lru_cache(maxsize=8)\n"
        "def memo(n):\n    return n\n"
        "def switch():\n    global SEEN\n"
    )
    (pkg / "constants.py").write_text(
        "import logging, re\n"
        "from dataclasses import dataclass\n"
        "from types import MappingProxyType\n"
        "from typing import Final\n"
        "@dataclass(frozen=True)\n"
        "class Limits:\n    n: int = 1\n"
        "CODES = frozenset({'a', 'b'})\n"
        "ORDER = ('a', 'b')\n"
        "TABLE = MappingProxyType({'a': 1})\n"
        "SCHEMA: Final = {'type': 'record'}\n"
        "PATTERN = re.compile('x')\n"
        "log = logging.getLogger(__name__)\n"
        "DEFAULTS = Limits()\n"
    )
    found = [line.split(": ", 1)[1] for line in scan_module_state(tmp_path)]
    assert found == [
        "global SEEN",
        "SEEN = a mutable dict",
        "NAMES = a mutable listcomp",
        "LRU = OrderedDict(...)",
        "POOL = ThreadPoolExecutor(...)",
        "LOCK = Lock(...)",
        "BOX = Box(...)",
        "a process-wide cache on memo()",
    ]
    assert all(line.startswith("storage/state.py:") for line in scan_module_state(tmp_path))


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


def _public_names(module: str) -> set[str]:
    return set(importlib.import_module(module).__all__)


def timeline_reaches(files: Iterable[Path], allowed: tuple[str, ...], root: Path) -> list[str]:
    """Imports of timeline code that go past the packages in `allowed` (a submodule, or a name
    the package does not export in `__all__`), as `path:line: what`."""
    exported = {m: _public_names(m) for m in allowed}
    out = []
    for path in files:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        where = path.relative_to(root)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    top = alias.name.split(".")[0]
                    if top == "timeline" and alias.name not in allowed:
                        out.append(f"{where}:{node.lineno}: import {alias.name}")
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                if node.module.split(".")[0] != "timeline":
                    continue
                if node.module not in allowed:
                    out.append(f"{where}:{node.lineno}: from {node.module}")
                    continue
                for alias in node.names:
                    if alias.name not in exported[node.module]:
                        out.append(f"{where}:{node.lineno}: {node.module}.{alias.name}")
    return out


def test_spark_integration_uses_only_timelines_top_level_public_names() -> None:
    """The Spark writers build on timeline's public API (footer stats, task writer, commit of
    engine-written files), never on its modules: what they need is exported."""
    files = sorted((ROOT / "flowledger" / "spark").rglob("*.py"))
    reaches = timeline_reaches(files, ("timeline",), ROOT)
    assert reaches == [], "flowledger/spark reaches into timeline:\n" + "\n".join(reaches)


def test_flowledger_uses_timeline_through_its_public_packages() -> None:
    files = sorted((ROOT / "flowledger").rglob("*.py"))
    reaches = timeline_reaches(files, ("timeline", "timeline.archive", "timeline.keyed"), ROOT)
    assert reaches == [], "flowledger reaches into timeline:\n" + "\n".join(reaches)


def test_timeline_reach_scan_finds_submodules_and_unexported_names(tmp_path: Path) -> None:
    (tmp_path / "job.py").write_text(
        "import timeline.layout\n"
        "from timeline.parquet_io import read_verified\n"
        "from timeline import Table, parquet_io\n"
        "from timeline import read_verified\n"
    )
    assert timeline_reaches([tmp_path / "job.py"], ("timeline",), tmp_path) == [
        "job.py:1: import timeline.layout",
        "job.py:2: from timeline.parquet_io",
        "job.py:3: timeline.parquet_io",
    ]


#: A citation of the project's own bookkeeping: the word issue, session or round (singular or
#: plural, any case) followed by a number, with at most a space, a hyphen and a "#" between.
#: Such numbers mean nothing to a reader of the repository; the text should say what a thing is
#: or why it exists. The words alone ("a Spark session", "a provenance session", "per round")
#: are fine: only a number after them makes a citation.
CITATION = re.compile(r"\b(?:issues?|sessions?|rounds?)[ -]?#?\d", re.IGNORECASE)
CITATION_SCANNED = (".py", ".md", ".toml", ".sh", ".yml", ".yaml", ".cfg", ".txt", ".ini")


def _repository_text_files() -> list[Path]:
    """The files of the checkout: git's list when there is one, else a walk without hidden and
    environment folders."""
    try:
        listed = subprocess.run(
            ["git", "-C", str(ROOT), "ls-files", "-z"],
            capture_output=True,
            check=True,
            timeout=60,
        ).stdout.decode()
        paths = [ROOT / p for p in listed.split("\0") if p]
    except (OSError, subprocess.SubprocessError):
        paths = [
            p
            for p in ROOT.rglob("*")
            if not any(part.startswith(".") for part in p.relative_to(ROOT).parts)
        ]
    return [
        p
        for p in paths
        if p.is_file() and (p.suffix in CITATION_SCANNED or p.name in ("Makefile", "run"))
    ]


def citations(text: str) -> list[str]:
    """Each line of `text` that cites an issue, a session or a round by number."""
    return [line.strip() for line in text.splitlines() if CITATION.search(line)]


def test_citation_check_tells_citations_from_plain_words() -> None:
    """The check itself: numbered references are found, the everyday words are not."""
    planted = "\n".join(
        [
            "Fixed as asked in iss" + "ue 12.",
            "See Iss" + "ue #14's acceptance.",
            "measured in sess" + "ion 4 at load 3",
            "the harness's rou" + "nds 1-2 and the next rou" + "nd-3",
        ]
    )
    assert len(citations(planted)) == 4
    plain = "\n".join(
        [
            "spark = SparkSession.builder.getOrCreate()  # one Spark session for the run",
            "a provenance session commits its events at once",
            "per round: one cold lookup, then 20 warm ones; value = round(x, 2)",
            "issue a request; 2 sessions; 3 rounds; the round-robin order",
        ]
    )
    assert citations(plain) == []


def test_no_issue_session_or_round_numbers_in_the_repository() -> None:
    """Code, tests and docs say what a thing is or why it exists, never which issue, work
    session or round it came from."""
    found = [
        f"{path.relative_to(ROOT)}: {line}"
        for path in _repository_text_files()
        for line in citations(path.read_text(encoding="utf-8", errors="replace"))
    ]
    assert found == [], "citations of issues, sessions or rounds:\n" + "\n".join(found)


#: The acceptance check for a repository that stands alone, run as written: the bookkeeping
#: words before a number, and any mention of the project's guide kept outside the repository
#: (what it says belongs in docs/). Split so that this file does not match itself.
OUTSIDE_REFERENCES = "session [0-9]|issue [0-9]|" + "DES" + "IGN"


def test_nothing_points_outside_the_repository() -> None:
    """`git grep -nE -i` of the pattern above over the tracked files finds nothing."""
    try:
        done = subprocess.run(
            ["git", "-C", str(ROOT), "grep", "-nE", "-i", OUTSIDE_REFERENCES],
            capture_output=True,
            text=True,
            timeout=60,
        )
    except OSError:
        done = None
    if done is not None and done.returncode in (0, 1):  # 1: no match
        found = done.stdout.splitlines()
    else:  # no git or not a checkout: the same search over the files on disk
        pattern = re.compile(OUTSIDE_REFERENCES, re.IGNORECASE)
        found = [
            f"{path.relative_to(ROOT)}: {line.strip()}"
            for path in _repository_text_files()
            for line in path.read_text(encoding="utf-8", errors="replace").splitlines()
            if pattern.search(line)
        ]
    assert found == [], "references to things outside the repository:\n" + "\n".join(found)


def test_every_module_the_architecture_map_names_exists() -> None:
    """docs/architecture.md's map walks a newcomer through named modules: each must exist."""
    doc = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    the_map = doc.split("## The map", 1)[1].split("\n## ", 1)[0]
    named = set(re.findall(r"`([\w/]+\.py)`", the_map))
    modules = [
        p.relative_to(ROOT).as_posix()
        for pkg in ("storage", "timeline", "provenance", "flowledger", "tests")
        for p in (ROOT / pkg).rglob("*.py")
    ]
    missing = sorted(n for n in named if not any(m == n or m.endswith("/" + n) for m in modules))
    assert named and missing == [], f"named in the map but not in the code: {missing}"


KEYED = ROOT / "timeline" / "keyed"
#: Timeline modules outside `keyed/` that still import it. The list may only shrink: a new
#: dependency on keyed tables is handed in (as archival's post-commit hook is), not imported.
KEYED_IMPORTERS = {
    "timeline/__init__.py",
    "timeline/check.py",
    "timeline/check_repair.py",
    "timeline/table.py",
}


def test_no_import_circle_involves_keyed_tables() -> None:
    """Type-hint imports included: keyed code takes the narrow `KeyedTable` context, never
    the `Table` that imports it."""
    _, cycles = scan(ROOT, type_hints=True)
    involved = [c for c in cycles if any(m.startswith("timeline.keyed") for m in c)]
    assert involved == [], f"import circles through timeline/keyed: {involved}"


def test_scan_with_type_hints_sees_a_type_checking_circle(tmp_path: Path) -> None:
    pkg = tmp_path / "timeline"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from . import b\n")
    (pkg / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import a\n"
    )
    assert scan(tmp_path)[1] == []
    assert scan(tmp_path, type_hints=True)[1] == [["timeline.a", "timeline.b"]]


def test_no_function_in_keyed_tables_is_longer_than_80_lines() -> None:
    long = [
        f"{p.relative_to(ROOT)}:{n.lineno} {n.name} ({n.end_lineno - n.lineno + 1} lines)"
        for p in sorted(KEYED.rglob("*.py"))
        for n in ast.walk(ast.parse(p.read_text()))
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
        and (n.end_lineno or n.lineno) - n.lineno + 1 > 80
    ]
    assert long == [], "split these into named steps:\n" + "\n".join(long)


def test_keyed_tables_have_one_of_each_step_for_both_table_types() -> None:
    """One write entry point, one incremental read, one CDC read, one `place_inserts`:
    copy-on-write and merge-on-read differ in what they write, not in how they are asked."""
    defined: dict[str, list[str]] = {}
    for p in sorted(KEYED.rglob("*.py")):
        for n in ast.parse(p.read_text()).body:
            if isinstance(n, ast.FunctionDef):
                defined.setdefault(n.name, []).append(str(p.relative_to(ROOT)))
    for name in ("write_keyed", "incremental", "cdc", "place_inserts"):
        assert len(defined.get(name, [])) == 1, f"{name} defined in {defined.get(name)}"
    assert not {"keyed_write", "delta_write"} & set(defined), "a second write entry point"


def _drops(loop: ast.AST) -> bool:
    """Whether a loop deletes entries (`del`, `.pop`)."""
    return any(
        isinstance(m, ast.Delete) or (isinstance(m, ast.Attribute) and m.attr == "pop")
        for m in ast.walk(loop)
    )


def fold_sites(root: Path) -> list[str]:
    """Where file groups are folded from writes: each call building a `FileGroup` or a
    `FileSlice`, and each loop over a write's `replaced` files that drops file groups
    (`del`, `.pop`), as `module:line kind`."""
    sites = []
    for pkg in ("storage", "timeline", "provenance", "flowledger"):
        for p in sorted((root / pkg).rglob("*.py")):
            where = p.relative_to(root).as_posix()
            for n in ast.walk(ast.parse(p.read_text())):
                called = n.func if isinstance(n, ast.Call) else None
                if isinstance(called, ast.Name) and called.id in ("FileGroup", "FileSlice"):
                    sites.append(f"{where}:{n.lineno} builds {called.id}")
                over = n.iter if isinstance(n, ast.For) else None
                if isinstance(over, ast.Attribute) and over.attr == "replaced" and _drops(n):
                    sites.append(f"{where}:{n.lineno} drops replaced groups")
    return sites


def test_file_groups_are_folded_in_one_place() -> None:
    """One file-group fold: `FileGroup`/`FileSlice` are built only in timeline/file_groups/
    (the model cuts slices, the view folds writes), and only the view drops replaced groups."""
    sites = fold_sites(ROOT)
    outside = [s for s in sites if not s.startswith("timeline/file_groups/")]
    assert outside == [], f"file groups folded outside timeline/file_groups: {outside}"
    drops = [s for s in sites if s.endswith("drops replaced groups")]
    assert len(drops) == 1 and drops[0].startswith("timeline/file_groups/view.py"), drops


def test_fold_scan_finds_a_planted_second_fold(tmp_path: Path) -> None:
    (tmp_path / "timeline" / "keyed").mkdir(parents=True)
    (tmp_path / "timeline" / "keyed" / "mine.py").write_text(
        "def groups(writes):\n"
        "    out = {}\n"
        "    for e in writes:\n"
        "        for f in e.replaced:\n"
        "            out.pop(f.group, None)\n"
        "    return [FileSlice(g, *v) for g, v in out.items()]\n"
    )
    assert fold_sites(tmp_path) == [
        "timeline/keyed/mine.py:4 drops replaced groups",
        "timeline/keyed/mine.py:6 builds FileSlice",
    ]


def test_timeline_modules_outside_keyed_do_not_import_it() -> None:
    found = set()
    for p in sorted((ROOT / "timeline").rglob("*.py")):
        if KEYED in p.parents:
            continue
        package = p.parent.relative_to(ROOT).parts
        for n in ast.walk(ast.parse(p.read_text())):
            if not isinstance(n, ast.ImportFrom):
                continue
            base = package[: len(package) - n.level + 1] if n.level else ()
            target = ".".join((*base, n.module or ""))
            if target.startswith("timeline.keyed"):
                found.add(p.relative_to(ROOT).as_posix())
    assert found <= KEYED_IMPORTERS, f"new imports of timeline/keyed: {found - KEYED_IMPORTERS}"
    assert found, "the scan found no importer at all: it is broken"


def _wing_imports() -> dict[str, set[str]]:
    """wing -> the names modules of keyed/ outside it import from the wing's package."""
    wings = {p.parent.name for p in KEYED.glob("*/__init__.py")}
    used: dict[str, set[str]] = {w: set() for w in wings}
    for p in KEYED.rglob("*.py"):
        rel = p.relative_to(KEYED).parts
        home = rel[0] if len(rel) > 1 else None
        for n in ast.walk(ast.parse(p.read_text())):
            if isinstance(n, ast.ImportFrom) and n.level and n.module in wings - {home}:
                modules = {m.stem for m in (KEYED / n.module).glob("*.py")}  # not names
                used[n.module] |= {a.name for a in n.names} - modules
    return used


def test_each_keyed_wing_exports_only_what_other_wings_use() -> None:
    for wing, used in _wing_imports().items():
        package = importlib.import_module(f"timeline.keyed.{wing}")
        exported = set(getattr(package, "__all__", []))
        assert exported == used, f"keyed/{wing}/__init__.py exports {exported ^ used} amiss"


def test_the_code_map_of_tables_md_lists_every_keyed_folder() -> None:
    doc = (ROOT / "docs" / "tables.md").read_text(encoding="utf-8")
    the_map = doc.split("**Code map**", 1)[1].split("\n\n", 2)[1]
    listed = set(re.findall(r"^\| `([\w/]+)/` \|", the_map, flags=re.M))
    folders = {"timeline/file_groups", "timeline/keyed"} | {
        p.parent.relative_to(ROOT).as_posix() for p in KEYED.glob("*/__init__.py")
    }
    assert listed == folders, f"code map and folders differ: {sorted(listed ^ folders)}"


#: The table services: on `table.maintenance`, not on `Table` (pyiceberg's `table.maintenance`).
TABLE_SERVICES = {
    "clean",
    "cluster",
    "compact",
    "recover",
    "restore",
    "rollback",
    "run_compaction",
    "savepoint",
    "schedule_compaction",
}


def test_table_offers_data_operations_and_services_as_a_sub_object() -> None:
    """`Table`'s public surface stays small: the data operations (read, write, upsert, insert,
    delete) and what a reader asks; services on `table.maintenance`, the instants plumbing
    on `table.instants`."""
    from timeline import Table
    from timeline.maintenance import Maintenance
    from timeline.table_instants import TableInstants

    public = {n for n in dir(Table) if not n.startswith("_")}
    assert len(public) <= 21, f"Table has {len(public)} public members: {sorted(public)}"
    assert {"read", "write", "upsert", "insert", "delete"} <= public
    assert not public & TABLE_SERVICES, f"services on Table: {sorted(public & TABLE_SERVICES)}"
    assert set(dir(Maintenance)) >= TABLE_SERVICES
    plumbing = {"load_instants", "known_timeline", "planning_timeline", "latest_seq"}
    assert not public & plumbing, f"instants plumbing on Table: {sorted(public & plumbing)}"
    # A merged read's file slices are the snapshot's (`Snapshot.merge_on_read_slices`).
    assert "merge_on_read_slices" not in public
    assert {"known_timeline", "planning_timeline", "latest_seq"} <= set(dir(TableInstants))
