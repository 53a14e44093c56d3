"""The shape of one bad-input case and the one way every case is checked.

A case builds its inputs in an empty folder, runs one ``planner`` command on them and
states what a user must get back: an exit code (3 for bad input, 4 for an infeasible
placement), a message that names the file, row or field at fault, and no output written.
Outputs that already exist before the run (a good earlier result) must come out byte for
byte as they were.

Cases run the command in a real subprocess, so that what is checked is what a user or
cron sees: the exit status, the stderr text, and the files on disk.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

EARLIER_OUTPUT = b"an earlier good output that a failed run must leave alone\n"
LOCK_FILE = ".lock"


@dataclass(frozen=True)
class BadInput:
    """One kind of bad input.

    ``build(folder)`` writes the case's input files into ``folder`` and returns the command
    line after ``planner`` (paths may be relative to ``folder``, the working directory).
    ``mentions``: substrings the error output must contain (the file, row, field or option
    at fault), compared case-insensitively after collapsing whitespace. ``earlier``: output
    paths (relative to ``folder``) that hold a good earlier result before the run and must
    be byte-identical after it. Every other file the run leaves in ``folder`` that was not
    there before is a defect ("nothing was written"), except a reports folder's ``.lock``:
    the lock of a folder that already existed stays, by design (``planner.workflows.report_lock``).
    """

    name: str
    build: Callable[[Path], list[str]]
    exit_codes: tuple[int, ...] = (3,)
    mentions: tuple[str, ...] = ()
    earlier: tuple[str, ...] = ()
    timeout_s: float = 120.0
    env: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Outcome:
    exit_code: int
    stdout: str
    stderr: str
    new_files: list[str]
    changed: list[str]


CHECKOUT = Path(__file__).resolve().parents[1]


def planner_command() -> list[str]:
    """How to start the CLI in a subprocess (with :func:`checkout_env`, this checkout's)."""
    return [sys.executable, "-m", "planner"]


def checkout_env(env: dict[str, str]) -> dict[str, str]:
    """``env`` with this checkout first on ``PYTHONPATH``: a subprocess run in another folder imports
    this checkout's planner, not whichever one the interpreter has installed (a worktree may share
    another checkout's virtual environment)."""
    paths = [str(CHECKOUT), *(p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p)]
    return {**env, "PYTHONPATH": os.pathsep.join(paths)}


def _snapshot(folder: Path) -> dict[str, bytes | None]:
    files: dict[str, bytes | None] = {}
    for path in folder.rglob("*"):
        if path.is_file() or path.is_symlink():
            rel = path.relative_to(folder).as_posix()
            try:
                files[rel] = path.read_bytes() if path.is_file() else None
            except OSError:  # a FIFO or an unreadable file: its presence is what counts
                files[rel] = None
    return files


def run_case(case: BadInput, folder: Path) -> Outcome:
    """Build the case in ``folder``, plant the earlier outputs, run it, and say what changed."""
    folder.mkdir(parents=True, exist_ok=True)
    argv = case.build(folder)
    for rel in case.earlier:
        target = folder / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(EARLIER_OUTPUT)
    before = _snapshot(folder)
    env = checkout_env({**os.environ, "COLUMNS": "400", "NO_COLOR": "1", **case.env})
    proc = subprocess.run([*planner_command(), *argv], cwd=folder, env=env, capture_output=True, text=True,
                          timeout=case.timeout_s, stdin=subprocess.DEVNULL)
    after = _snapshot(folder)
    new_files = sorted(rel for rel in set(after) - set(before) if Path(rel).name != LOCK_FILE)
    changed = sorted(rel for rel in before if rel in after and after[rel] != before[rel])
    return Outcome(proc.returncode, proc.stdout, proc.stderr, new_files, changed)


def _flat(text: str) -> str:
    return " ".join(text.split()).lower()


def check_outcome(case: BadInput, outcome: Outcome) -> list[str]:
    """Every way the outcome falls short of the case's promise (empty: it holds)."""
    problems = []
    if outcome.exit_code not in case.exit_codes:
        problems.append(f"exit code {outcome.exit_code}, expected one of {case.exit_codes}")
    said = _flat(outcome.stderr + "\n" + outcome.stdout)
    for needle in case.mentions:
        if _flat(needle) not in said:
            problems.append(f"the message does not mention {needle!r}")
    if "Traceback (most recent call last)" in outcome.stderr:
        problems.append("a raw traceback was printed")
    if outcome.new_files:
        problems.append(f"files were written: {outcome.new_files}")
    if outcome.changed:
        problems.append(f"earlier outputs were changed: {outcome.changed}")
    return problems
