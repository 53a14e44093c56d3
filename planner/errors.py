"""One hierarchy for every domain error, each carrying its exit code and a fix hint.

Exit codes are the contract cron reads (docs: architecture.md). The core raises
these; only the CLI edge turns them into a process exit status.
"""

from __future__ import annotations

from pathlib import Path


class ExitCode:
    OK = 0
    UNEXPECTED = 1
    USAGE = 2
    INVALID_INPUT = 3
    INFEASIBLE = 4
    SLO_FAILED = 5
    INTERRUPTED = 130  # Ctrl-C (SIGINT): 128 + 2, what a shell reports for a process that died of it
    TERMINATED = 143  # SIGTERM (timeout, systemd, Kubernetes): 128 + 15


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived: the run stops exactly as on Ctrl-C, but ends with exit code 143."""

    exit_code = ExitCode.TERMINATED


class PlannerError(Exception):
    """Base for every error the planner reports to a user.

    ``where`` locates the problem (file, row, field); ``fix`` says what to do about it.
    """

    exit_code: int = ExitCode.UNEXPECTED

    def __init__(self, message: str, *, where: str | Path | None = None, fix: str | None = None):
        super().__init__(message)
        self.message = message
        self.where = str(where) if where is not None else None
        self.fix = fix

    def __str__(self) -> str:
        parts = [f"{self.where}: {self.message}" if self.where else self.message]
        if self.fix:
            parts.append(f"To fix: {self.fix}")
        return "\n".join(parts)


class UsageError(PlannerError):
    """The command line itself is wrong (an unknown option value, a missing argument)."""

    exit_code = ExitCode.USAGE


class InputError(PlannerError):
    """An input file or configuration is invalid. Nothing was written."""

    exit_code = ExitCode.INVALID_INPUT


class InfeasibleError(PlannerError):
    """The placement problem has no solution; the message names the demand or constraint at fault."""

    exit_code = ExitCode.INFEASIBLE


class SLOFailedError(PlannerError):
    """A plan was produced, but some class still misses its SLO after the allowed rounds."""

    exit_code = ExitCode.SLO_FAILED
