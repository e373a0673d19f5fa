"""One error spine: every error class any package defines descends from the one root and from
its package's base, and has exactly one kind (storage/error_kinds.py), inherited from one kind
base. The classes are found by walking every module of every package, not from a list."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

from flowledger.errors import ANSWERS, EXIT_UNKNOWN_OUTCOME, FlowledgerError
from flowledger.service.errors import ServiceError
from flowledger.spark.errors import SparkSetupError
from provenance import ProvenanceError
from storage import (
    KIND_BASES,
    ConflictError,
    ErrorKind,
    FlowledgerBaseError,
    StorageError,
    UnknownOutcomeError,
)
from storage.content import ContentRepositoryError
from timeline import TimelineError

pytestmark = pytest.mark.unit

PACKAGES = ("storage", "timeline", "provenance", "flowledger")

# Most specific prefix first: the base every error defined under that module prefix derives from.
ROOTS: tuple[tuple[str, type[BaseException]], ...] = (
    ("storage.content.", ContentRepositoryError),
    ("storage.", StorageError),
    ("timeline.", TimelineError),
    ("provenance.", ProvenanceError),
    ("flowledger.service.", ServiceError),
    ("flowledger.", FlowledgerError),
)
# The root and the kind bases live beside the storage errors but belong to no package.
SPINE = {FlowledgerBaseError, *KIND_BASES}


def _modules() -> list[str]:
    names = []
    for package in PACKAGES:
        pkg = importlib.import_module(package)
        names.append(package)
        for info in pkgutil.walk_packages(pkg.__path__, package + "."):
            if not info.name.endswith("__main__"):  # running it would start the CLI
                names.append(info.name)
    return names


def _project_errors() -> list[type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for name in _modules():
        mod = importlib.import_module(name)
        for _, c in inspect.getmembers(mod, inspect.isclass):
            if issubclass(c, BaseException) and c.__module__ == name:
                found[f"{c.__module__}.{c.__qualname__}"] = c
    return list(found.values())


ERRORS = _project_errors()


def _id(c: type[BaseException]) -> str:
    return f"{c.__module__}.{c.__qualname__}"


def test_the_walk_finds_every_package_errors() -> None:
    modules = {c.__module__ for c in ERRORS}
    for m in (
        "storage.errors",
        "storage.content.errors",
        "timeline.errors",
        "timeline.archive.errors",
        "timeline.keyed.properties",
        "provenance.errors",
        "provenance.session.errors",
        "flowledger.errors",
        "flowledger.service.errors",
        "flowledger.spark.errors",
    ):
        assert m in modules, m
    assert SparkSetupError in ERRORS


@pytest.mark.parametrize("cls", ERRORS, ids=_id)
def test_every_error_has_one_kind_and_its_package_root(cls: type[BaseException]) -> None:
    assert issubclass(cls, FlowledgerBaseError), f"{_id(cls)} is outside the spine"
    assert isinstance(cls.kind, ErrorKind) and cls.kind in ANSWERS
    bases = [b for b in KIND_BASES if issubclass(cls, b)]
    assert len(bases) <= 1, f"{_id(cls)} has two kinds: {bases}"
    # The kind comes from the kind base (or the root's), never set by hand on a class.
    assert cls.kind == (bases[0].kind if bases else FlowledgerBaseError.kind)
    if cls in SPINE:
        return
    assert "kind" not in vars(cls), f"{_id(cls)} sets its kind by hand"
    root = next(r for prefix, r in ROOTS if cls.__module__.startswith(prefix))
    assert issubclass(cls, root), f"{_id(cls)} does not derive from {root.__qualname__}"


@pytest.mark.parametrize("cls", ERRORS, ids=_id)
def test_conflict_and_unknown_outcome_are_spelled_one_way(cls: type[BaseException]) -> None:
    name = cls.__name__
    assert "OutcomeUnknown" not in name, f"{name}: spelled `...UnknownOutcome` everywhere"
    if name.endswith("Conflict"):
        assert issubclass(cls, ConflictError), f"{name} is a conflict outside the kind"
    if name.endswith("UnknownOutcome"):
        assert issubclass(cls, UnknownOutcomeError), f"{name} is outside the kind"


def test_each_package_has_its_conflict_and_unknown_outcome() -> None:
    from provenance import errors as prov
    from storage import errors as st
    from storage.content import errors as content
    from timeline import errors as tl
    from timeline.archive import errors as arch

    pairs = [
        (st.Conflict, st.UnknownOutcome, st.StorageError),
        (content.ContentConflict, content.ContentUnknownOutcome, content.ContentRepositoryError),
        (tl.CommitConflict, tl.CommitUnknownOutcome, tl.TimelineError),
        (arch.ArchiveConflict, arch.ArchiveUnknownOutcome, arch.ArchiveError),
        (prov.ProvenanceConflict, prov.ProvenanceUnknownOutcome, prov.ProvenanceError),
    ]
    for conflict, unknown, base in pairs:
        # Caught as the package's error (as before) and as the shared kind.
        assert issubclass(conflict, base) and issubclass(conflict, ConflictError)
        assert issubclass(unknown, base) and issubclass(unknown, UnknownOutcomeError)
    # The kind bases are not storage errors: catching StorageError still catches only storage.
    assert not issubclass(prov.ProvenanceConflict, st.StorageError)
    assert not issubclass(tl.CommitUnknownOutcome, st.StorageError)


def test_the_table_gives_every_kind_its_own_exit_code() -> None:
    assert set(ANSWERS) == set(ErrorKind)
    codes = [a.exit_code for a in ANSWERS.values()]
    assert len(set(codes)) == len(codes), codes
    assert EXIT_UNKNOWN_OUTCOME == 3
