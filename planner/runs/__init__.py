"""The run history: every planner run recorded in an embedded DuckDB file (see ``store``)."""

from planner.runs.recording import (
    LastMonth,
    RunContext,
    exit_code_of,
    history_rows,
    input_hash,
    key_figure,
    last_month,
    previous_month,
    recording,
)
from planner.runs.store import HistoryBusyError, RunHistory, RunRecord, default_history_path

__all__ = [
    "HistoryBusyError",
    "LastMonth",
    "RunContext",
    "RunHistory",
    "RunRecord",
    "default_history_path",
    "exit_code_of",
    "history_rows",
    "input_hash",
    "key_figure",
    "last_month",
    "previous_month",
    "recording",
]
