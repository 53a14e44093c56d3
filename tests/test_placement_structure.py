"""How placement is put together: no import cycle, backends by registry, silent solvers.

The import graph is read from the source (every ``import`` statement of every module of
``planner.placement``, those inside functions included), so a cycle fails here even when a
lazy import would let it run.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO_ROOT
from placement_helpers import two_region_case

from planner.placement import backends, highs_backend, pulp_backend
from planner.placement.problem import formulate
from planner.placement.status import SolveOutcome, SolveStatus

PACKAGE = "planner.placement"


def import_graph(folder: Path, package: str) -> dict[str, set[str]]:
    """Module -> the modules of the same package it imports (``package`` itself for its ``__init__``)."""
    modules = {path.stem: path for path in folder.glob("*.py")}

    def module_of(name: str) -> str | None:
        if name == package:
            return package
        if name.startswith(package + "."):
            head = name[len(package) + 1:].split(".")[0]
            return f"{package}.{head}" if head in modules else package
        return None

    graph: dict[str, set[str]] = {}
    for stem, path in modules.items():
        this = package if stem == "__init__" else f"{package}.{stem}"
        edges: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                edges.update(m for alias in node.names if (m := module_of(alias.name)) is not None)
            elif isinstance(node, ast.ImportFrom) and node.module is not None and node.level == 0:
                if node.module == package:  # ``from planner.placement import x``: a submodule or a name of __init__
                    edges.update(f"{package}.{a.name}" if a.name in modules else package for a in node.names)
                elif (target := module_of(node.module)) is not None:
                    edges.add(target)
        graph[this] = edges - {this}
    return graph


def cycle(graph: dict[str, set[str]]) -> list[str] | None:
    try:
        tuple(TopologicalSorter(graph).static_order())
    except CycleError as error:
        return list(error.args[1])
    return None


def test_placement_has_no_import_cycle():
    graph = import_graph(REPO_ROOT / "planner" / "placement", PACKAGE)
    assert f"{PACKAGE}.strengthen" in graph[f"{PACKAGE}.problem"]  # the graph sees the real imports
    assert cycle(graph) is None, f"import cycle: {' -> '.join(cycle(graph) or [])}"


def test_the_cycle_check_finds_a_lazy_import_cycle(tmp_path):
    (tmp_path / "__init__.py").write_text("")
    (tmp_path / "a.py").write_text("from pkg.b import B\n")
    (tmp_path / "b.py").write_text("def f():\n    from pkg import a\n    return a\n")
    (tmp_path / "c.py").write_text("import pkg.a\n")
    graph = import_graph(tmp_path, "pkg")
    assert graph == {"pkg": set(), "pkg.a": {"pkg.b"}, "pkg.b": {"pkg.a"}, "pkg.c": {"pkg.a"}}
    assert set(cycle(graph) or []) == {"pkg.a", "pkg.b"}


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
