"""The `flowledger` command line (typer). Errors go to stderr as one line; the exit code is
the error kind's (flowledger/errors.py: 1 failed, 2 bad input, 3 a write whose outcome is
unknown, docs/faults.md; docs/architecture.md lists them all)."""

from __future__ import annotations

import os
import sys
from typing import Annotated, NoReturn

import typer
from rich.console import Console
from typer._click.exceptions import (  # typer's vendored click
    ClickException,
    NoArgsIsHelpError,
    UsageError,
)
from typer.exceptions import Abort

from storage import UnknownOutcomeError

from .commands import content
from .commands import pipeline as pipeline_cmd
from .commands import provenance as provenance_cmd
from .commands import table as table_cmd
from .commands import timeline as timeline_cmd
from .commands.options import RepoOption, RootRepoOption
from .context import CliContext, cli_context
from .errors import EXIT_UNKNOWN_OUTCOME, REPORTED, answer_for
from .output import error_line, one_line

app = typer.Typer(no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False)
app.add_typer(content.app, name="content")
app.add_typer(provenance_cmd.app, name="provenance")
app.add_typer(timeline_cmd.app, name="timeline")
app.add_typer(table_cmd.app, name="table")
app.add_typer(pipeline_cmd.app, name="pipeline")


@app.callback()
def root(
    ctx: typer.Context,
    repo: RootRepoOption = None,
    auto_archive: Annotated[
        bool,
        typer.Option(
            "--auto-archive/--no-auto-archive",
            envvar="FLOWLEDGER_AUTO_ARCHIVE",
            help="Archive old instants after commits (hoodie.archive.automatic; keep 20-30)",
        ),
    ] = True,
) -> None:
    """flowledger: content, provenance and an ACID timeline on object storage."""
    # `repo` is read by each subcommand's --repo (commands/options.py): before or after it.
    ctx.obj = CliContext(auto_archive=auto_archive)


@app.command()
def demo(
    ctx: typer.Context,
    repo: RepoOption = None,
    spark_master: Annotated[str | None, typer.Option(help="Spark master URL")] = None,
) -> None:
    """Run the NYC flights 2013 pipeline (`flowledger pipeline run`) on the repository."""
    pipeline_cmd.run_and_print(cli_context(ctx), repo, spark_master)


@app.command()
def tour(repo: RepoOption = None) -> None:
    """A tour of every feature on synthetic data (object store, timeline, content, provenance)."""
    from .demo import run_demo

    run_demo(repo, Console())


@app.command()
def serve(
    ctx: typer.Context,
    repo: RepoOption = None,
    host: Annotated[str, typer.Option(help="Interface to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port (0: a free one, printed on start)")] = 8080,
    allow_remote: Annotated[
        bool, typer.Option(help="Allow a non-loopback --host (put TLS in front)")
    ] = False,
    token_file: Annotated[
        str | None, typer.Option(help="Token file (default: the repository's state folder)")
    ] = None,
    workers: Annotated[
        int, typer.Option(help="Server processes on the port (each a stateless replica)")
    ] = 1,
) -> None:
    """Serve the HTTP API and the lineage page (bearer token; see docs/service.md)."""
    from .service import ServiceSettings
    from .service import serve as run_server

    settings = ServiceSettings(
        host=host,
        port=port,
        allow_remote=allow_remote,
        token_file=token_file,
        workers=workers,
        auto_archive=cli_context(ctx).auto_archive,
    )
    run_server(repo, settings)


def _usage_error(exc: UsageError) -> NoReturn:
    """The problem on one line first (scripts and logs read that); typer's box only for a
    person at a terminal, where it adds the usage and the `--help` hint."""
    if isinstance(exc, NoArgsIsHelpError):
        sys.exit(exc.exit_code)  # typer has printed the group's help already
    error_line(exc.format_message())
    if sys.stderr.isatty():
        from typer import rich_utils

        rich_utils.rich_format_error(exc)
    sys.exit(exc.exit_code)


def main() -> None:
    try:
        code = app(standalone_mode=False)
    except UsageError as exc:
        _usage_error(exc)
    except ClickException as exc:  # e.g. a file option it could not open
        error_line(exc.format_message())
        sys.exit(exc.exit_code)
    except BrokenPipeError:  # `| head` closed the pipe: not an error worth a message
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # the exit flush would fail again
        sys.exit(141)
    except KeyboardInterrupt:
        error_line("interrupted", prefix="flowledger: ")
        sys.exit(130)
    except Abort:
        error_line("aborted")
        sys.exit(1)
    except UnknownOutcomeError as exc:  # may have landed: never reported as a plain failure
        error_line(f"unknown outcome: {one_line(exc)}")
        sys.exit(EXIT_UNKNOWN_OUTCOME)
    except REPORTED as exc:  # the exit code is the kind's (flowledger/errors.py)
        error_line(exc)
        sys.exit(answer_for(exc).exit_code)
    except Exception as exc:  # a bug, not the user's input: still one line, no traceback
        if os.environ.get("FLOWLEDGER_TRACEBACK"):
            raise
        error_line(
            f"{type(exc).__name__}: {one_line(exc)} (set FLOWLEDGER_TRACEBACK=1 for the traceback)",
            prefix="flowledger: internal error: ",
        )
        sys.exit(70)  # EX_SOFTWARE
    sys.exit(code if isinstance(code, int) else 0)
