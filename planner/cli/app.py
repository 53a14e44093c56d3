"""The command-line edge: parse arguments, call the core, render with rich, map errors to exit codes.

Nothing below this module knows about exit codes or terminals: the core raises
``PlannerError`` subclasses and this module turns them into the codes cron reads
(architecture.md): 0 ok, 1 unexpected, 2 usage, 3 invalid input, 4 infeasible,
5 SLO failed after the allowed rounds.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from planner import __version__
from planner.console import print_error, print_table, stderr
from planner.errors import ExitCode, PlannerError

app = typer.Typer(
    name="planner",
    help="Capacity planner for LLM inference fleets: forecast, place, simulate, report.",
    context_settings={"help_option_names": ["-h", "--help"]},
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@dataclass
class _Session:
    verbose: bool = False


session = _Session()

F = TypeVar("F", bound=Callable[..., Any])


def guarded(command: F) -> F:
    """Run a command, turning domain errors into their exit code and a readable message."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except (typer.Exit, typer.Abort):
            raise
        except PlannerError as exc:
            if session.verbose:
                stderr.print_exception()
            print_error(exc.message, fix=exc.fix, where=exc.where, code=exc.exit_code)
            raise typer.Exit(exc.exit_code) from None
        except BrokenPipeError:
            # The reader of our stdout went away (e.g. `planner catalog --json | head`): not an error.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            raise typer.Exit(0) from None
        except KeyboardInterrupt:
            print_error("interrupted; no output was written", code=130)
            raise typer.Exit(130) from None
        except Exception as exc:  # the last line of defence: never a bare traceback for users
            if session.verbose:
                stderr.print_exception()
            print_error(
                f"unexpected error: {type(exc).__name__}: {exc}",
                fix="rerun with --verbose to see the traceback, and report it with the command you ran",
                code=ExitCode.UNEXPECTED,
            )
            raise typer.Exit(ExitCode.UNEXPECTED) from None

    return wrapper  # type: ignore[return-value]


def _version_callback(value: bool) -> None:
    if value:
        print(f"planner {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Show tracebacks and debug detail.", envvar="PLANNER_VERBOSE")
    ] = False,
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version_callback, is_eager=True, help="Print the version and exit."),
    ] = False,
) -> None:
    session.verbose = verbose


JsonFlag = Annotated[bool, typer.Option("--json", help="Print the table as JSON instead.")]


def print_outputs(rows: list[dict[str, Any]], *, title: str, as_json: bool, written: list[Path], **extra: Any) -> None:
    """The common ending of a command that writes files: its table (or JSON with ``extra``), then what it wrote."""
    print_table(rows, title=title, as_json=as_json, json_extra={**extra, "written": [str(p) for p in written]})
    if not as_json:
        for path in written:
            stderr.print(f"wrote {path}")


def main() -> None:
    app()
