"""A long run's narration: one line per step with the time since the run began where stderr is not a terminal
(cron mail, CI logs), a spinner on a terminal."""

from __future__ import annotations

import io

from rich.console import Console

from planner.console import narrated


def test_off_a_terminal_each_step_is_a_line_with_the_time_since_the_run_began():
    out = io.StringIO()
    console = Console(file=out, force_terminal=False, width=200)
    now = [1000.0]
    with narrated("reading the history...", console=console, clock=lambda: now[0]) as say:
        now[0] += 75.4
        say("calibrating capacity for fcfs: 3 of 15 units, about 2 min left [not markup]")
        now[0] += 3600
        say("placing")
    assert out.getvalue().splitlines() == [
        "[  0:00] reading the history...",
        "[  1:15] calibrating capacity for fcfs: 3 of 15 units, about 2 min left [not markup]",
        "[ 61:15] placing",
    ]


def test_on_a_terminal_the_steps_update_one_transient_line():
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=120)
    with narrated("reading the history...", console=console) as say:
        say("placing")
    text = out.getvalue()
    assert "placing" in text and "[  0:00]" not in text
