"""One calibration replication, today's path against the numpy it replaced, on the same seeds in one run.

A calibration probe simulates replications (``planner/calibrate/probe.py`` ``_replication_row``): draw the sample
(for a class with declared reuse, every request's list of prompt blocks), relabel the blocks densely for the engine,
run the compiled engine, and read each class's arrivals and SLO p99s. Outside the engine this was numpy building
and sorting millions of block ids, and the full per-class metrics of which the probe reads four numbers. Today:

* compiled loops write the block lists (``planner/sim/replica/block_lists.py``);
* ``planner/sim/dense_ids.py`` relabels ids without a sort;
* ``class_p99s`` computes only what the probe reads.

``baseline`` swaps back the numpy expressions these replaced (``np.unique(..., return_inverse=True)``, the
``np.repeat`` forms the tests hold the loops to, and ``replication_metrics``) for the same replications. Per case
(unit, rate as a fraction of its analytic ceiling) it prints both paths' seconds over the replications, the
engine's share, the ratio, and whether the rows are the same to the bit (they must be). The two paths alternate
replication by replication, so load on a shared machine falls on both. Every figure comes from this machine and
this run, with the 1-minute load average before and after. Usage::

    python benchmarks/probe_replication_speed.py [--models llama-3.1-8b,llama-3.1-70b] [--skus H100]
        [--fractions 0.5,0.8] [--replications 8]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import planner.calibrate.probe as probe_module  # noqa: E402
import planner.sim.class_reuse as class_reuse  # noqa: E402
import planner.sim.replica.block_lists as block_lists  # noqa: E402
import planner.sim.replica.pool as pool_module  # noqa: E402
from planner.calibrate.inputs import Settings, build_tasks, class_shares, select_units  # noqa: E402
from planner.calibrate.probe import _replication_row, pool_config  # noqa: E402
from planner.calibrate.run import DEFAULT_DURATION_S  # noqa: E402
from planner.compile_ahead import prepare  # noqa: E402
from planner.profiles import load_profiles  # noqa: E402
from planner.scenario import load_scenario  # noqa: E402
from planner.sim.policies import policy_values  # noqa: E402
from planner.sim.replica.metrics import replication_metrics  # noqa: E402
from planner.sim.simulate import WARMUP_FRACTION  # noqa: E402

DEMO = ROOT / "scenarios" / "demo.toml"


def _position(ptr: np.ndarray) -> np.ndarray:
    return np.arange(int(ptr[-1]), dtype=np.int64) - np.repeat(ptr[:-1], np.diff(ptr))


def _numpy_dense_ids(ids: np.ndarray) -> tuple[int, np.ndarray]:
    distinct, inverse = np.unique(np.asarray(ids, dtype=np.int64), return_inverse=True)
    return int(distinct.size), inverse.astype(np.int64).ravel()


def _numpy_stream_ids(ptr: np.ndarray, first_id: np.ndarray) -> np.ndarray:
    return np.repeat(first_id, np.diff(ptr)) + _position(ptr)


def _numpy_shared_prefix_ids(ptr: np.ndarray, ids: np.ndarray, variant: np.ndarray, per_variant: int,
                             variants: int) -> np.ndarray:
    position = _position(ptr)
    shared = position < per_variant
    out = ids + variants * per_variant
    out[shared] = np.repeat(variant, np.diff(ptr))[shared] * per_variant + position[shared]
    return out


def _numpy_gathered(ids: np.ndarray, starts: np.ndarray, sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    ptr = np.zeros(sizes.size + 1, dtype=np.int64)
    np.cumsum(sizes, out=ptr[1:])
    return ptr, ids[np.repeat(starts, sizes) + _position(ptr)]


def _full_metrics_rows(rep):  # type: ignore[no-untyped-def]
    rows, _ = replication_metrics(rep)
    return rows


@contextlib.contextmanager
def baseline() -> Iterator[None]:
    """The numpy path: every replaced function swapped back for the expression it replaced."""
    swaps = [(block_lists, "stream_ids", _numpy_stream_ids), (block_lists, "shared_prefix_ids",
                                                               _numpy_shared_prefix_ids),
             (block_lists, "gathered", _numpy_gathered), (pool_module, "dense_ids", _numpy_dense_ids),
             (class_reuse, "dense_ids", _numpy_dense_ids), (probe_module, "class_p99s", _full_metrics_rows)]
    kept = [(module, name, getattr(module, name)) for module, name, _ in swaps]
    try:
        for module, name, fn in swaps:
            setattr(module, name, fn)
        yield
    finally:
        for module, name, fn in kept:
            setattr(module, name, fn)


def _load() -> str:
    return "load {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def _timed_row(task, config, i: int, engine_s: list[float]):  # type: ignore[no-untyped-def]
    run = pool_module.run_replication

    def timed(cfg, seed):  # type: ignore[no-untyped-def]
        rep = run(cfg, seed)
        engine_s.append(rep.wall_s)
        return rep

    probe_module.run_replication = timed
    try:
        began = time.perf_counter()
        row = _replication_row(task, config, i)
        return row, time.perf_counter() - began
    finally:
        probe_module.run_replication = run


def run(args: argparse.Namespace) -> None:
    scenario = load_scenario(DEMO)
    profiles = load_profiles()
    prepare()
    params, admission = scenario.policy.params, scenario.policy.admission
    settings = Settings(duration_s=DEFAULT_DURATION_S, warmup_fraction=WARMUP_FRACTION,
                        replications=args.replications, seed=scenario.seeds.base, rel_tol=0.02, confidence=0.95,
                        pool_replicas=1, policy=scenario.policy.name, prediction_sigma=params.prediction_noise_sigma,
                        policy_params=tuple(policy_values(params.model_dump()).items()),
                        kv_fraction=admission.kv_fraction, output_quantile_reserve=admission.output_quantile_reserve,
                        search_settings=False, router=scenario.policy.routing.router)
    units, _ = select_units(scenario, profiles, args.models.split(","), args.skus.split(","))
    tasks = build_tasks(scenario, units, class_shares(scenario, None), settings, None)
    print(f"{len(tasks)} units of the demo at its default engine setting, its class mix and policy "
          f"{settings.policy}; {args.replications} replications per case; {_load()}")
    warm = pool_config(tasks[0], tasks[0].candidates[0], 0.5 * tasks[0].mix_ceiling_rps(tasks[0].candidates[0]))
    with baseline():  # one untimed replication of each path: first calls load what they need
        _timed_row(tasks[0], warm, 0, [])
    _timed_row(tasks[0], warm, 0, [])
    print(f"{'unit':34s} {'rate':>6s} {'requests':>9s} {'numpy s':>8s} {'today s':>8s} {'engine s':>9s} "
          f"{'ratio':>6s} {'same':>5s}")
    totals = {"numpy": 0.0, "today": 0.0, "engine numpy": 0.0, "engine today": 0.0}
    for task in tasks:
        replica = task.candidates[0]
        for fraction in (float(x) for x in args.fractions.split(",")):
            config = pool_config(task, replica, fraction * task.mix_ceiling_rps(replica))
            seconds = {"numpy": 0.0, "today": 0.0}
            engine: dict[str, list[float]] = {"numpy": [], "today": []}
            same, requests = True, 0.0
            for i in range(args.replications):
                with baseline():
                    old, old_s = _timed_row(task, config, i, engine["numpy"])
                new, new_s = _timed_row(task, config, i, engine["today"])
                seconds["numpy"] += old_s
                seconds["today"] += new_s
                same = same and repr(old) == repr(new)
                requests += sum(v["arrived"] for v in new.values())
            for path in ("numpy", "today"):
                totals[path] += seconds[path]
                totals["engine " + path] += sum(engine[path])
            print(f"{task.label:34s} {fraction:6.2f} {requests / args.replications:9.0f} {seconds['numpy']:8.2f} "
                  f"{seconds['today']:8.2f} {sum(engine['today']):9.2f} {seconds['numpy'] / seconds['today']:6.2f} "
                  f"{'yes' if same else 'NO':>5s}")
    outside_old, outside_new = totals["numpy"] - totals["engine numpy"], totals["today"] - totals["engine today"]
    print(f"\nall cases: numpy {totals['numpy']:.1f} s, today {totals['today']:.1f} s "
          f"(x{totals['numpy'] / totals['today']:.2f}); outside the engine {outside_old:.1f} s -> {outside_new:.1f} s "
          f"(x{outside_old / outside_new:.2f}); the engine {totals['engine numpy']:.1f} s and "
          f"{totals['engine today']:.1f} s; {_load()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="llama-3.1-8b,llama-3.1-70b")
    parser.add_argument("--skus", default="H100")
    parser.add_argument("--fractions", default="0.5,0.8", help="rates as fractions of each unit's analytic ceiling")
    parser.add_argument("--replications", type=int, default=8)
    run(parser.parse_args())


if __name__ == "__main__":
    main()
