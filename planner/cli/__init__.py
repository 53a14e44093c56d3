"""The command-line edge: parse arguments, call one workflow, render with rich, map errors to exit codes.

``app`` holds the shared machinery (the error guard, run recording, output helpers);
each module beside it registers the commands of one part of the pipeline.
"""

from planner.cli import data, forecast, loop, place, report, simulate, sweep  # noqa: F401  (registers the commands)
from planner.cli.app import FrontDoor, app, guarded, main, open_front_door

__all__ = ["FrontDoor", "app", "guarded", "main", "open_front_door"]
