"""The command-line edge: parse arguments, call one workflow, render with rich, map errors to exit codes.

Nothing below this module knows about exit codes or terminals: the core raises
``PlannerError`` subclasses and this module turns them into the codes cron reads
(architecture.md): 0 ok, 1 unexpected, 2 usage, 3 invalid input, 4 infeasible,
5 SLO failed after the allowed rounds, 130 interrupted by Ctrl-C, 143 by SIGTERM.

SIGTERM (what ``timeout``, systemd and Kubernetes send) stops a run exactly like Ctrl-C:
the guard turns it into :class:`~planner.errors.Terminated`, a ``KeyboardInterrupt``, so
the same clean-up runs (staged outputs removed, worker processes stopped) and the run is
recorded with the code the process ends with. A reader that closes our stdout early
(``planner catalog --json | head -1``) is not an error: exit 0, recorded as 0.

Every command except ``planner history`` (which only reads) is recorded in the run
history (``planner.runs``): command, arguments, version, input hashes, times, exit code,
outputs and the key figures its workflow adds to the run (the command's ``run`` argument). The history
file is ``--history-file``, else ``PLANNER_HISTORY``, else ``$XDG_DATA_HOME/planner/history.duckdb``.

The root options are resolved once, at the front door, into a frozen :class:`FrontDoor` on the
click context; a command resolves the rest of its settings (:mod:`planner.settings`) in its
workflow (:mod:`planner.workflows`). Nothing here is module state: :func:`guarded` hands each
command what it declares, ``run`` (the :class:`RunContext` being recorded, None when not
recorded) and ``front`` (the :class:`FrontDoor`), as arguments that are not options.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, TypeVar

import click
import typer
from typer.core import TyperCommand, TyperGroup

from planner import __version__
from planner.console import print_error, print_table, stderr
from planner.contracts import SIMULATED_WINDOW, DurationError, duration_seconds, parse_duration
from planner.errors import ExitCode, InputError, PlannerError, Terminated
from planner.runs import RunContext, RunHistory, input_hash, recording
from planner.sim.work import SIM_DURATION_OPTION

Command = TypeVar("Command", bound=Callable[..., Any])


def _flags_shown_as_flags(params: list[Any]) -> list[Any]:
    """Bool flags without a value placeholder in help: typer prints ``<bool>`` beside ``--json``, as if it took one."""
    for param in params:
        if getattr(param, "is_flag", False) and param.metavar is None:
            param.metavar = ""  # what the help shows in the type column; a flag takes no value to name
    return params


class PlannerCommand(TyperCommand):
    """A planner command: its help shows bool options as the flags they are."""

    def get_params(self, ctx: Any) -> list[Any]:
        return _flags_shown_as_flags(super().get_params(ctx))


class PlannerGroup(TyperGroup):
    """A group of planner commands (``planner``, ``planner profiles``): flags shown as flags, as in its commands."""

    def get_params(self, ctx: Any) -> list[Any]:
        return _flags_shown_as_flags(super().get_params(ctx))


class PlannerTyper(typer.Typer):
    """A typer app whose commands are :class:`PlannerCommand` unless they ask for another class."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("cls", PlannerGroup)
        kwargs.setdefault("context_settings", {"help_option_names": ["-h", "--help"]})
        super().__init__(**kwargs)

    def command(self, *args: Any, **kwargs: Any) -> Callable[[Command], Command]:
        kwargs.setdefault("cls", PlannerCommand)
        return super().command(*args, **kwargs)


app = PlannerTyper(
    name="planner",
    help="Capacity planner for LLM inference fleets: forecast, place, simulate, report.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    epilog="Run `planner COMMAND -h` for a command's options and examples.",
)


def examples(*commands: str) -> str:
    """The ``Examples:`` block that ends a command's help (its ``epilog``): one command per line, as typed.

    A command may span lines (``\\`` at a line's end, continuation lines indented): help
    keeps the lines as written, so each example can be pasted into a shell.
    """
    lines = [f"  {line}" for command in commands for line in command.strip("\n").splitlines()]
    return "Examples:\n\n" + "\n".join(lines)


@dataclass(frozen=True)
class FrontDoor:
    """The root options, resolved once per invocation (``planner --verbose --history-file ... COMMAND``)."""

    verbose: bool = False
    history_file: Path | None = None


NO_ROOT_OPTIONS = FrontDoor()
"""The root options when none were given (and the default of a command's ``front`` argument)."""


def open_front_door(ctx: typer.Context, *, verbose: bool = False, history_file: Path | None = None) -> None:
    """Resolve the root options for this invocation."""
    ctx.obj = FrontDoor(verbose=verbose, history_file=history_file)


def _front_door(ctx: click.Context) -> FrontDoor:
    """This invocation's root options (the defaults when the app has no root callback)."""
    obj = ctx.find_root().obj
    return obj if isinstance(obj, FrontDoor) else NO_ROOT_OPTIONS


INJECTED = ("run", "front")
"""A command's parameters that the guard fills in (not command-line options)."""
CONTEXT_PARAMETER = "planner_context"
"""The keyword the guard takes the click context by (typer fills it in; a direct caller passes its own)."""


F = TypeVar("F", bound=Callable[..., Any])

NOT_RECORDED = frozenset({"history"})
"""Commands that only read the run history; recording them would fill it with its own listings."""
OUTPUT_PARAMETERS = frozenset({"out", "out_dir", "plots", "debug", "metadata_out", "reports"})
LARGEST_HASHED_INPUT_BYTES = 2 << 30
"""Inputs above 2 GiB (raw request logs) are recorded by path and size only: hashing them costs seconds."""


def _arguments(kwargs: dict[str, Any]) -> dict[str, Any]:
    return {name: str(value) if isinstance(value, Path) else value for name, value in sorted(kwargs.items())}


def _input_hashes(kwargs: dict[str, Any]) -> dict[str, str]:
    hashes = {}
    for name, value in sorted(kwargs.items()):
        if isinstance(value, Path) and name not in OUTPUT_PARAMETERS and value.is_file():
            try:
                size = value.stat().st_size
                hashes[name] = input_hash(value) if size <= LARGEST_HASHED_INPUT_BYTES else f"not hashed: {size} bytes"
            except OSError as exc:  # unreadable: the command's own check reports it, with exit code 3
                hashes[name] = f"not hashed: {exc.strerror or exc}"
    return hashes


LARGEST_SEED = 2**63 - 1
"""Seeds are recorded and passed on as 64-bit integers."""


def _check_seed(kwargs: dict[str, Any]) -> None:
    """Every command with ``--seed`` takes a whole number in [0, 2**63 - 1]."""
    seed = kwargs.get("seed")
    if isinstance(seed, int) and not 0 <= seed <= LARGEST_SEED:
        raise InputError(f"{seed} is not a seed: seeds are whole numbers from 0 to {LARGEST_SEED}",
                         where="--seed", fix="pass e.g. --seed 1, or leave --seed out to use the default")


def _raise_terminated(signum: int, frame: Any) -> None:
    raise Terminated(f"signal {signal.Signals(signum).name}")


@contextlib.contextmanager
def _sigterm_interrupts() -> Iterator[None]:
    """While a command runs, SIGTERM raises :class:`Terminated` in the main thread, as Ctrl-C does."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so that flushing what is left at exit cannot fail again."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


@contextlib.contextmanager
def _recorded(name: str, kwargs: dict[str, Any], front: FrontDoor) -> Iterator[RunContext | None]:
    """Record this run in the run history around the command's body (see the module docstring).

    The seed given with ``--seed`` is recorded at the start; the workflow records the seed it
    resolved (``--seed`` or the scenario's), so a run on the default seed has it too.
    """
    if name in NOT_RECORDED:
        yield None
        return
    history = RunHistory(front.history_file)
    month = kwargs.get("month") if isinstance(kwargs.get("month"), str) else None
    seeds = {"seed": kwargs["seed"]} if isinstance(kwargs.get("seed"), int) else {}
    with recording(history, name, _arguments(kwargs), month=month, seeds=seeds,
                   input_hashes=_input_hashes(kwargs)) as run:
        try:
            yield run
        finally:
            for notice in history.notices:
                stderr.print(f"[yellow]note:[/] {notice}")


def guarded(command: F) -> F:
    """Run a command, recording it, and turn domain errors into their exit code and a readable message."""
    name = command.__name__.removesuffix("_command")
    signature = inspect.signature(command, eval_str=True)
    wanted = [p for p in INJECTED if p in signature.parameters]

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        ctx = kwargs.pop(CONTEXT_PARAMETER)
        front = _front_door(ctx)
        try:
            with _sigterm_interrupts(), _recorded(name, kwargs, front) as run:
                _check_seed(kwargs)
                given = {"run": run, "front": front}
                try:
                    result = command(*args, **kwargs, **{p: given[p] for p in wanted})
                    sys.stdout.flush()  # a closed pipe shows here, while the run is still being recorded
                except BrokenPipeError:
                    # The reader of our stdout went away (e.g. `planner catalog --json | head`): not an error.
                    _silence_stdout()
                    raise typer.Exit(ExitCode.OK) from None
                return result
        except (typer.Exit, typer.Abort):
            raise
        except PlannerError as exc:
            if front.verbose:
                stderr.print_exception()
            print_error(exc.message, fix=exc.fix, where=exc.where, code=exc.exit_code)
            raise typer.Exit(exc.exit_code) from None
        except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM as Terminated
            code = int(getattr(exc, "exit_code", ExitCode.INTERRUPTED))
            cause = "by SIGTERM" if isinstance(exc, Terminated) else "by Ctrl-C"
            print_error(f"interrupted {cause}; no output was written", code=code)
            raise typer.Exit(code) from None
        except Exception as exc:  # the last line of defence: never a bare traceback for users
            if front.verbose:
                stderr.print_exception()
            print_error(
                f"unexpected error: {type(exc).__name__}: {exc}",
                fix="rerun with --verbose to see the traceback, and report it with the command you ran",
                code=ExitCode.UNEXPECTED,
            )
            raise typer.Exit(ExitCode.UNEXPECTED) from None

    # What typer reads: the command's options, without the injected arguments, and the click context.
    options = [p for p in signature.parameters.values() if p.name not in INJECTED]
    context = inspect.Parameter(CONTEXT_PARAMETER, inspect.Parameter.KEYWORD_ONLY, annotation=typer.Context)
    wrapper.__signature__ = signature.replace(parameters=[*options, context])  # type: ignore[attr-defined]
    wrapper.__annotations__ = {**{p.name: p.annotation for p in options}, CONTEXT_PARAMETER: typer.Context}
    return wrapper  # type: ignore[return-value]


def _version_callback(value: bool) -> None:
    if value:
        print(f"planner {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    ctx: typer.Context,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Show tracebacks and debug detail.", envvar="PLANNER_VERBOSE")
    ] = False,
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version_callback, is_eager=True, help="Print the version and exit."),
    ] = False,
    history_file: Annotated[
        Path | None,
        typer.Option("--history-file", help="Run history (DuckDB) to record runs in; default: PLANNER_HISTORY, "
                                            "else ~/.local/share/planner/history.duckdb."),
    ] = None,
) -> None:
    open_front_door(ctx, verbose=verbose, history_file=history_file)


JsonFlag = Annotated[bool, typer.Option("--json", help="Print the table as JSON instead.")]


def print_commitments(plan_meta: dict[str, Any], horizon_usd: float) -> None:
    """A plan's reserved commitments over their whole term, beside the horizon's cost (stderr; nothing without)."""
    from planner.report.fleet import commitment_sentence

    sentence = commitment_sentence(plan_meta.get("reserved"), horizon_usd)
    if sentence:
        stderr.print(sentence, markup=False)


def print_outputs(rows: list[dict[str, Any]], *, title: str, as_json: bool, written: list[Path], **extra: Any) -> None:
    """The common ending of a command that writes files: its table (or JSON with ``extra``), then what it wrote."""
    print_table(rows, title=title, as_json=as_json, json_extra={**extra, "written": [str(p) for p in written]})
    if not as_json:
        for path in written:
            stderr.print(f"wrote {path}")



EngineOption = Annotated[
    str, typer.Option(help="Where independent work runs: local, processes, dask or auto (processes on >1 core).")
]
WorkersOption = Annotated[int | None, typer.Option(help="Workers for processes or an embedded Dask cluster.")]
SchedulerOption = Annotated[
    str | None,
    typer.Option(help="Dask scheduler address, e.g. tcp://scheduler:8786 (with --engine dask; default: "
                      "$DASK_SCHEDULER_ADDRESS, else an embedded LocalCluster)."),
]

HistogramOption = Annotated[
    list[Path] | None, typer.Option(help="Token-length histogram from `planner ingest`, or a folder of them; repeat "
                                         "for several (default: the scenario's declared lengths).")
]
SeedOption = Annotated[int | None, typer.Option(help="Base seed (default: the scenario's).")]
MinHistoryOption = Annotated[str, typer.Option(
    help="History a series needs, from its first observed hour, before a model replaces the seasonal naive "
         "(hours masked as outages count; at least 3/4 must be observed), e.g. 7d, 240h.")]
MaxGrowthOption = Annotated[float, typer.Option(
    "--max-growth", metavar="MULTIPLE",
    help="Cap every forecast value at this multiple of its series' largest observed hour; each cap is reported.")]
CommitOnShortHistoryFlag = Annotated[bool, typer.Option(
    "--commit-on-short-history",
    help="Reserve beyond the history's steady load even with under 8 weeks of history per year of reserved term.")]
PartialHoursOption = Annotated[str, typer.Option(
    "--partial-hours", metavar="mask|keep",
    help="Hours that look partly collected (below 60% of the hour before, the hour after and the same hour a week "
         "earlier): mask them like outages (not learned as demand) or keep them as demand; either way reported.")]
SetOption = Annotated[list[str] | None, typer.Option(
    "--set", metavar="PATH=VALUE",
    help="Change one scenario field for this run, by its dotted path (list entries by name), e.g. "
         "classes.interactive.ttft_p99_ms=350 or capacity.tiers='[\"on_demand\"]'. Repeatable.")]
DemandScaleOption = Annotated[list[str] | None, typer.Option(
    "--demand-scale", metavar="X | KEY=NAME:X",
    help="Scale the forecast demand: 2 (every series) or region=eu-west:1.5 (also model=, class=). Repeatable; "
         "overlapping scales multiply.")]


def what_if(overrides: list[str] | None, demand: list[str] | None = None) -> Any:
    """The run's ``--set`` and ``--demand-scale`` changes, each checked before any work."""
    from planner.workflows.common import WhatIf

    return WhatIf.parse(overrides, demand)


def check_engine_options(engine: str, scheduler: str | None, workers: int | None) -> None:
    """Check the engine options before any work starts (the workflow resolves them into its settings)."""
    from planner.engine import check_engine

    check_engine(engine, scheduler, workers)


def announce_compile(seconds: float) -> None:
    """The one line on stderr while the simulator compiles (cold cache only)."""
    stderr.print(f"compiling the simulator (one time, about {seconds:.0f} s)...", highlight=False)


SIM_DURATION = SIM_DURATION_OPTION
"""The one name of the simulated time per replication, on every command that simulates."""
OldDurationOption = Annotated[
    str | None, typer.Option("--duration", hidden=True, help=f"Old name of {SIM_DURATION} (deprecated).")
]
"""``--duration``, the name ``simulate`` and ``calibrate`` gave the simulated time before: scripts still use it."""


def renamed_option(value: str | None, old_value: str | None, *, name: str, old_name: str, default: str) -> str:
    """An option's value given under its name, or under its old name (with a warning on stderr), else ``default``."""
    if old_value is None:
        return default if value is None else value
    if value is not None:
        raise InputError(f"{old_name} is the old name of {name}: give one of them, not both", where=old_name,
                         fix=f"drop {old_name} {old_value} and keep {name} {value}")
    stderr.print(f"warning: {old_name} is deprecated, use {name} (the same setting, one name on every command)",
                 highlight=False, markup=False, soft_wrap=True)
    return old_value


def parse_duration_s(text: str, option: str = SIM_DURATION) -> float:
    """'30min', '1h', '900s' -> seconds."""
    try:
        seconds = duration_seconds(parse_duration(text, SIMULATED_WINDOW))
    except DurationError:
        seconds = 0.0
    if seconds <= 0:
        raise InputError(f"{option} {text!r} is not a positive duration", where=option,
                         fix="pass e.g. 30min, 1h or 900s")
    return seconds


def main() -> None:
    app()
