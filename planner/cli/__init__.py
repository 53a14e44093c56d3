"""The command-line edge: parse arguments, call the core, render with rich, map errors to exit codes.

``app`` holds the shared machinery (the error guard, run recording, output helpers);
each module beside it registers the commands of one part of the pipeline.
"""

from planner.cli import data, forecast, loop, place, report, simulate  # noqa: F401  (registers the commands)
from planner.cli.app import app, guarded, main, session

__all__ = ["app", "guarded", "main", "session"]
