"""A catalogue of bad inputs across every command: each gives exit 3 (or 4), names what is wrong,
writes nothing and leaves earlier outputs intact (``bad_inputs_harness``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bad_inputs_harness import BadInput, check_outcome, run_case
from conftest import REPO_ROOT

DEMO_SCENARIO = REPO_ROOT / "scenarios" / "demo.toml"


def _scenario_with(folder: Path, old: str, new: str) -> Path:
    text = DEMO_SCENARIO.read_text(encoding="utf-8")
    assert old in text, old
    path = folder / "scenario.toml"
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    return path


CASES = [
    BadInput(
        "validate: a scenario that is not TOML",
        lambda d: (d.joinpath("s.toml").write_text("name = [unclosed\n"), ["validate", "s.toml"])[1],
        mentions=("s.toml",),
    ),
    BadInput(
        "validate: a negative SLO",
        lambda d: ["validate", _scenario_with(d, "ttft_p99_ms = ", "ttft_p99_ms = -").name],
        mentions=("scenario.toml", "ttft_p99_ms"),
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_input_is_refused_cleanly(case: BadInput, tmp_path: Path) -> None:
    outcome = run_case(case, tmp_path)
    assert check_outcome(case, outcome) == [], outcome.stderr
