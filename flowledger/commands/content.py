"""`flowledger content ...`: put a file into the content repository, get it back by claim."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Annotated, BinaryIO, cast

import typer

from storage.content import ContentClaim, ContentRepository, ContentRepositorySettings

from ..progress import CountingReader, CountingWriter, progress

# Same as cli.RepoOption (not imported from there: cli imports this module).
RepoOption = Annotated[
    str | None,
    typer.Option(
        "--repo", envvar="FLOWLEDGER_REPO", help="Repository URI (default ./flowledger-data)"
    ),
]

app = typer.Typer(no_args_is_help=True, help="NiFi-style content repository on object storage.")

# A CLI process is short-lived: no background cleanup thread, no orphan sweep on every call.
_CLI_SETTINGS = ContentRepositorySettings(archive_cleanup_frequency=0, cleanup_on_start=False)


def _open(repo: str | None) -> ContentRepository:
    return ContentRepository.open(repo, _CLI_SETTINGS)


def _claim(text: str) -> ContentClaim:
    """CLAIM is the JSON `content put` printed, or a path to a file holding it."""
    if not text.lstrip().startswith("{") and Path(text).is_file():
        text = Path(text).read_text()
    return ContentClaim.from_json(text)


@app.command()
def put(
    file: Annotated[Path, typer.Argument(exists=True, dir_okay=False, help="File to store")],
    repo: RepoOption = None,
) -> None:
    """Store FILE as one content (committed) and print its claim as JSON."""
    with _open(repo) as content:
        with (
            content.transaction() as session,
            open(file, "rb") as fh,
            progress(f"content put {file.name}", file.stat().st_size) as bar,
            session.write() as w,
        ):
            w.write_from(cast(BinaryIO, CountingReader(fh, bar)))
        assert w.claim is not None
    print(w.claim.to_json())


@app.command()
def get(
    claim: Annotated[str, typer.Argument(help="Claim JSON (from `content put`) or a file")],
    output: Annotated[Path, typer.Option("-o", "--output", help="Where to write the bytes")],
    repo: RepoOption = None,
) -> None:
    """Write the content CLAIM names to FILE (verified against its checksum)."""
    parsed = _claim(claim)
    # A unique temp name beside the target (same filesystem: the rename is atomic), removed
    # on any failure: never a half-written or unverified file, under any name.
    fd, name = tempfile.mkstemp(dir=output.parent, prefix=f".{output.name}.", suffix=".partial")
    tmp = Path(name)
    try:
        with (
            os.fdopen(fd, "wb") as fh,
            _open(repo) as content,
            progress(f"content get {output.name}", max(parsed.length, 0)) as bar,
        ):
            n = content.export_to(parsed, cast(BinaryIO, CountingWriter(fh, bar)))
        tmp.replace(output)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    print(f"wrote {n} bytes to {output}", file=sys.stderr)


@app.command()
def cleanup(
    repo: RepoOption = None,
    older_than: Annotated[
        float | None,
        typer.Option(
            "--older-than",
            min=0,
            help="Seconds; default: multipart_purge_age (fs.s3a.multipart.purge.age, 24 h)",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output")] = False,
) -> None:
    """Remove what crashed writers left: abort incomplete multipart uploads (local: temp
    files) older than --older-than, and archive unreferenced contents (orphans)."""
    with _open(repo) as content:
        aborted = content.abort_stale_uploads(older_than)
        orphans = content.cleanup()  # the orphan sweep (uploads are done above)
    if as_json:
        print(json.dumps({"aborted_uploads": aborted, "archived_orphans": orphans}))
    else:
        print(f"aborted {aborted} incomplete uploads, archived {orphans} orphaned contents")


@app.command()
def state(
    claim: Annotated[str, typer.Argument(help="Claim JSON (from `content put`) or a file")],
    repo: RepoOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output")] = False,
) -> None:
    """Show whether a content is still accessible and its resource claim's state."""
    parsed = _claim(claim)
    with _open(repo) as content:
        info = {
            "claim": parsed.to_dict(),
            "state": content.claim_state(parsed),
            "claimant_count": content.get_claimant_count(parsed),
            "accessible": content.is_accessible(parsed),
        }
    if as_json:
        print(json.dumps(info))
    else:
        print(
            f"{parsed}: {info['state']}, {info['claimant_count']} claimants, "
            f"{'accessible' if info['accessible'] else 'not accessible'}"
        )
