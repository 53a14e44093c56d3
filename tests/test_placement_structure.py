"""How placement is put together: backends by registry, and solvers that print nothing.

(The whole package's import graph is checked for cycles in ``test_code_shape.py``.)
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from conftest import REPO_ROOT
from placement_helpers import two_region_case

from planner.placement import backends, highs_backend, pulp_backend
from planner.placement.problem import formulate
from planner.placement.status import SolveOutcome, SolveStatus


def test_the_registries_keep_the_command_line_names_and_the_cross_check():
    assert list(backends.BACKENDS)[:3] == ["highs", "cbc", "ortools"]
    assert "pulp-highs" in backends.HIDDEN_BACKENDS
    assert not set(backends.BACKENDS) & set(backends.HIDDEN_BACKENDS)


def test_a_backend_is_one_registry_entry(monkeypatch):
    calls: list[str] = []

    def recording(milp, *, time_limit_s, gap, node_limit=None, start=None) -> SolveOutcome:
        calls.append("solved")
        return highs_backend.solve(milp, time_limit_s=time_limit_s, gap=gap, node_limit=node_limit, start=start)

    monkeypatch.setattr(backends, "HIDDEN_BACKENDS", {**backends.HIDDEN_BACKENDS, "recording": recording})
    inst, _ = two_region_case().instance()
    milp = formulate(inst)
    outcome = backends.run_backend("recording", milp, time_limit_s=30, gap=1e-4)
    assert calls == ["solved"]
    assert outcome.status == SolveStatus.OPTIMAL
    unknown = backends.run_backend("no-such-solver", milp, time_limit_s=30, gap=1e-4)
    assert unknown.status == SolveStatus.ERROR
    assert unknown.message == "unknown backend 'no-such-solver'"


def test_cbc_reports_the_bound_it_writes_only_to_its_log():
    """Stopped after one node with a gap, CBC's proven bound is read from its output (PuLP drops it)."""
    rng = np.random.default_rng(1)
    demand = {("us-east", "llama-3.1-8b", "interactive"): list(np.round(rng.uniform(0.3, 9.0, 8), 2)),
              ("us-east", "llama-3.1-8b", "batch"): list(np.round(rng.uniform(0.3, 15.0, 8), 2))}
    case = two_region_case(demand, capacity_rules={"switching_cost_usd": 0.7}, quota=7, h100_tp2=(9.0, 17.0))
    inst, _ = case.instance()
    outcome = pulp_backend.solve_cbc(formulate(inst, cuts=False), time_limit_s=60, gap=0.0, node_limit=1)
    assert outcome.status == SolveStatus.NODE_LIMIT_WITH_INCUMBENT
    assert np.isfinite(outcome.bound)
    assert 0 < outcome.bound < outcome.objective - 1e-6
    assert not outcome.hit_time_limit


def test_captured_output_gathers_a_child_process_output_in_memory():
    log = pulp_backend.CapturedOutput()
    code = ("import sys; sys.stdout.write('x' * 200_000); sys.stdout.flush(); "
            "sys.stderr.write('Result - Stopped on time'); sys.stderr.flush()")
    child = subprocess.Popen([sys.executable, "-c", code], stdout=log, stderr=log)  # more than a pipe buffer holds
    assert child.wait(timeout=60) == 0
    log.close()
    assert log.text() == "x" * 200_000 + "Result - Stopped on time"


@pytest.mark.parametrize("first", ["new_highs()", "solve"])
def test_highs_prints_nothing_on_stdout_not_even_its_banner(first):
    """The first HiGHS object of a process would print a licence banner; later ones (PuLP's too) stay silent."""
    start = ("highs_backend.new_highs()" if first == "new_highs()" else
             "highs_backend.solve(formulate(two_region_case().instance()[0]), time_limit_s=30, gap=0.01)")
    code = ("import sys; sys.path.insert(0, 'tests')\n"
            "from placement_helpers import two_region_case\n"
            "from planner.placement import highs_backend\n"
            "from planner.placement.problem import formulate\n"
            f"{start}\n"
            "import highspy\n"
            "highspy.Highs()\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
