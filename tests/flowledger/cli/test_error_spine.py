"""One error spine: every package's errors descend from one root, and every
package's conflict / unknown outcome subclasses the one shared pair, never both."""

from __future__ import annotations

import importlib
import inspect

import pytest

from storage import ConflictError, FlowledgerBaseError, UnknownOutcomeError

pytestmark = pytest.mark.unit

ERROR_MODULES = (
    "storage.errors",
    "storage.content.errors",
    "timeline.errors",
    "timeline.archive.errors",
    "provenance.errors",
    "flowledger.errors",
)


def _declared(module: str) -> list[type[BaseException]]:
    mod = importlib.import_module(module)
    return [
        c
        for _, c in inspect.getmembers(mod, inspect.isclass)
        if issubclass(c, BaseException) and c.__module__ == module
    ]


@pytest.mark.parametrize("module", ERROR_MODULES)
def test_package_errors_share_one_root_and_one_pair(module: str) -> None:
    classes = _declared(module)
    assert classes, module
    for c in classes:
        assert issubclass(c, FlowledgerBaseError), f"{c.__qualname__} is outside the spine"
        assert not (issubclass(c, ConflictError) and issubclass(c, UnknownOutcomeError)), c
        name = c.__name__
        if "Conflict" in name and c is not ConflictError:
            assert issubclass(c, ConflictError), f"{name} is a conflict outside the pair"
        if ("UnknownOutcome" in name or "OutcomeUnknown" in name) and c is not UnknownOutcomeError:
            assert issubclass(c, UnknownOutcomeError), f"{name} is outside the pair"


def test_each_package_has_its_conflict_and_unknown_outcome() -> None:
    from provenance import errors as prov
    from storage import errors as st
    from storage.content import errors as content
    from timeline import errors as tl
    from timeline.archive import errors as arch

    pairs = [
        (st.Conflict, st.UnknownOutcome, st.StorageError),
        (content.ContentConflict, content.ContentUnknownOutcome, content.ContentRepositoryError),
        (tl.CommitConflict, tl.CommitOutcomeUnknown, tl.TimelineError),
        (arch.ArchiveConflict, arch.ArchiveOutcomeUnknown, arch.ArchiveError),
        (prov.ProvenanceConflict, prov.ProvenanceUnknownOutcome, prov.ProvenanceError),
    ]
    for conflict, unknown, base in pairs:
        # Caught as the package's error (as before) and as the shared kind.
        assert issubclass(conflict, base) and issubclass(conflict, ConflictError)
        assert issubclass(unknown, base) and issubclass(unknown, UnknownOutcomeError)
    # The shared pair is not a storage error: catching StorageError still catches only storage.
    assert not issubclass(prov.ProvenanceConflict, st.StorageError)
    assert not issubclass(tl.CommitOutcomeUnknown, st.StorageError)


def test_cli_exits_3_on_every_unknown_outcome_and_1_on_a_conflict(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A write that may have landed is never reported like one that failed (docs/faults.md)."""
    from flowledger import cli
    from provenance import errors as prov
    from storage import errors as st
    from storage.content import errors as content
    from timeline import errors as tl
    from timeline.archive import errors as arch

    cases: list[tuple[BaseException, int]] = [
        (st.UnknownOutcome("put x: may or may not"), 3),
        (tl.CommitOutcomeUnknown("commit of instant 1"), 3),
        (prov.ProvenanceUnknownOutcome("ingest"), 3),
        (content.ContentUnknownOutcome("ledger"), 3),
        (arch.ArchiveOutcomeUnknown("manifest"), 3),
        (tl.CommitConflict("lost"), 1),
        (st.EndpointUnreachable("cannot reach S3 endpoint"), 1),
    ]
    for exc, code in cases:

        def boom(*args: object, exc: BaseException = exc, **kwargs: object) -> None:
            raise exc

        monkeypatch.setattr(cli, "app", boom)
        with pytest.raises(SystemExit) as done:
            cli.main()
        assert done.value.code == code, exc
        err = capsys.readouterr().err
        assert err.count("\n") == 1
        assert err.startswith("flowledger: error: unknown outcome: ") == (code == 3), err
