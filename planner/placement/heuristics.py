"""LP-guided warm starts: serving sets and reserved vectors ranked by LP, then solved as MILPs.

The LP relaxation of a block puts reserved replicas R at fractional values just under what
the peak needs, and serving indicators y at 0/1 or in between. A warm start fixes y to a
serving set and R to an integer vector, which leaves a MILP in on-demand and spot replicas
and flows only: it solves in seconds where the whole block takes minutes.

* Serving sets, best LP value first: the LP's own (y > 0, and y ≥ 0.5) and every one-region
  change of the better of the two (each priced by the LP with y fixed); the best
  ``SERVING_SETS`` are searched.
* Reserved vectors: start at the LP's ``⌈R − 0.35⌉`` (repaired to the quota rows: where
  rounding up over-subscribes a quota, the units rounded furthest above their LP value go
  down one replica at a time), then steepest descent, ±1 replica on one unit of a served
  region or one replica moved between two units of a region, on the value of the LP with
  the rounded capacity cuts (``strengthen.py``) and y, R fixed. It is the block's cut LP,
  still loaded from the bound (``highs_backend.LoadedLp``), and it re-solves from the
  previous basis, which makes each vector cheap to price; a move whose reduced cost shows
  it cannot improve is not priced at all. With the cuts the LP
  charges a too-small R the on-demand replicas the peaks need and their switching, so it
  ranks vectors much like the MILP does.
* The ``RESERVED_CANDIDATES`` best vectors of each serving set are the candidates, best
  cut-LP value first; that value bounds the candidate's plan from below, so a candidate
  whose value is above the best plan found ends the search. With y and R fixed, every row
  left is per period, so a candidate is completed period by period (``by_period.py``:
  each period's small MILP on its own, the fixed core's optimum), the first
  ``TRIALS_BY_PERIOD`` of them; a switching cost is set aside there and settled per unit
  afterwards. Where a budget row links the periods, the first ``TRIALS`` are solved as
  MILPs with the cut rows instead.
* Every plan found then has its steady on-demand replicas bought reserved where that is
  cheaper and every row allows it (``steady.py``): the LP meets a region's replica floor
  with fractions of reserved replicas, the completed plan with whole on-demand ones.
* Two roundings of the best serving set leave little on demand: the generous ``⌈R − 0.05⌉``
  and the consolidated one (each region's LP reserved capacity in whole replicas, on the
  units with the largest fractions). Completed period by period they are cheap and are
  always tried: where switching makes on-demand replicas dear they beat the ranked core.
  As a MILP the generous rounding is the easiest one, so it is solved when no ranked
  candidate gave a plan, and first when there are more than ``LONG_HORIZON_PERIODS``
  periods, since the LPs then take most of the time
  (``docs/decisions/0005-placement-blocks-cuts-and-warm-starts.md``,
  ``0020-placement-completes-fixed-cores-period-by-period.md``,
  ``0026-placement-switching-blocks-completed-period-by-period.md``,
  ``0027-global-placement-measured-as-place-builds-it.md``).

Every step is bounded by a count, never by the clock (``limits.py``), so the warm start
is the same on any machine: at most ``2 + |y|`` serving-set LPs, ``DESCENT_EVALUATIONS``
reserved-vector LPs per serving set, and ``TRIALS`` MILPs of at most ``trial_nodes`` nodes
each (or ``TRIALS_BY_PERIOD`` completions, each period's MILP node-limited). The
wall-clock safety net only skips what is left once it has expired, and that is recorded;
the calls that make the block's first plan (its serving set unpriced, if need be, and the
rounded cores) get ``PLAN_GRACE_S`` past it, so that a block always has a plan.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from planner.placement import highs_backend
from planner.placement.backends import run_backend
from planner.placement.by_period import PeriodSplit
from planner.placement.limits import PLAN_GRACE_S, SafetyNet
from planner.placement.milp import Milp
from planner.placement.status import SolveOutcome, SolveStatus
from planner.placement.steady import reserve_steady_replicas
from planner.placement.strengthen import group_cuts

ROUNDING_SLACK = 0.35
FALLBACK_SLACK = 0.05
LONG_HORIZON_PERIODS = 168
DESCENT_EVALUATIONS = 240
"""Reserved vectors priced per serving set, each one warm-started LP re-solve; enough for the
descent to settle on the large blocks (figures: decision 0005)."""
RESERVED_CANDIDATES = 3
SERVING_SETS = 2
TRIALS = 3
"""Fixed-core MILPs solved, best cut-LP value first over every serving set. Each costs a
root solve, the dearest step of the warm start; the best plan came from the first few
(figures: decision 0005)."""
TRIALS_BY_PERIOD = 1
"""Fixed-core plans completed period by period (``by_period.py``): each is optimal for its core,
and the core with the best cut-LP value gave the best plan on every block measured (decision 0020)."""


def _fixed(milp: Milp, block: str, values: np.ndarray) -> Milp:
    """The block with the columns of ``block`` (y: serving indicators, R: reserved replicas) fixed."""
    lo, hi = milp.col_lo.copy(), milp.col_hi.copy()
    cols = milp.cols[block]
    lo[cols.start:cols.stop] = hi[cols.start:cols.stop] = values
    return replace(milp, col_lo=lo, col_hi=hi, _names={})


def _with_y(milp: Milp, y_values: np.ndarray) -> Milp:
    """The block with its serving indicators fixed."""
    return _fixed(milp, "y", y_values)


def _round_reserved(milp: Milp, lp_x: np.ndarray, slack: float) -> Milp:
    """Fix R to the LP's reserved replicas rounded up, ``⌈R − slack⌉``, then repaired to the quota.

    Rounding every R up can over-subscribe a (region, SKU) quota row; where it does, the
    units of that row whose LP value was furthest below the rounded value are rounded down
    instead, one replica at a time, until the reserved GPUs fit.
    """
    inst = milp.instance
    r = milp.cols["R"]
    units = r.index["u"]
    values = lp_x[r.start:r.stop]
    rounded = np.clip(np.ceil(values - slack), milp.col_lo[r.start:r.stop], milp.col_hi[r.start:r.stop])
    quota = inst.quota_per_period().min(axis=2)
    gpus = inst.unit_gpus[units]
    for region, sku in {(int(a), int(b)) for a, b in zip(inst.unit_region[units], inst.unit_sku[units], strict=True)}:
        members = np.flatnonzero((inst.unit_region[units] == region) & (inst.unit_sku[units] == sku))
        while (gpus[members] * rounded[members]).sum() > quota[region, sku]:
            excess = rounded[members] - values[members]
            excess[rounded[members] <= 0] = -np.inf
            pick = members[int(np.argmax(excess))]
            if rounded[pick] <= 0:
                break
            rounded[pick] -= 1
    return _fixed(milp, "R", rounded)


def _consolidate_reserved(milp: Milp, lp_x: np.ndarray) -> Milp:
    """Fix R to the LP's reserved capacity per region in whole replicas on as few units as it takes.

    The LP spreads a region's reserved replicas thinly over several units (0.3 of one SKU,
    0.2 of another); rounding each up buys a replica per unit. Here every unit keeps its
    whole replicas ``⌊R⌋``, and the units with the largest fractions get one more, in that
    order, until the region's reserved capacity (replicas × planned req/s of the unit's best
    class) reaches the LP's. Falling short instead leaves peaks to on-demand replicas,
    which a switching cost makes dear.
    """
    inst = milp.instance
    r = milp.cols["R"]
    units = r.index["u"]
    values = lp_x[r.start:r.stop]
    col_lo, col_hi = milp.col_lo[r.start:r.stop], milp.col_hi[r.start:r.stop]
    capacity = inst.unit_cap_rps[units].max(axis=1)
    rounded = np.clip(np.floor(values + 1e-6), col_lo, col_hi)
    for region in np.unique(inst.unit_region[units]):
        members = np.flatnonzero(inst.unit_region[units] == region)
        wanted = float(capacity[members] @ values[members]) * (1 - 1e-6)
        for i in members[np.argsort(rounded[members] - values[members], kind="stable")]:
            if float(capacity[members] @ rounded[members]) >= wanted:
                break
            if values[i] > rounded[i] + 1e-6 and rounded[i] < col_hi[i]:
                rounded[i] += 1
    return _fixed(milp, "R", rounded)


def _serving_candidates(milp: Milp, lp_x: np.ndarray, lp_value: float,
                        net: SafetyNet) -> list[tuple[float, np.ndarray, np.ndarray]]:
    """Serving sets y to try, best LP value first: the LP's own (y > 0 rounded up, and y ≥ 0.5),
    and every one-region change (drop a served region, add an unserved one) of the better one.

    Returns (LP value, y, LP solution) triples, each priced by the LP with y fixed.
    """
    y = milp.cols["y"]
    seen: set[bytes] = set()
    out: list[tuple[float, np.ndarray, np.ndarray]] = []

    def evaluate(values: np.ndarray) -> None:
        key = values.astype(np.int8).tobytes()
        if key in seen or net.skip("a serving-set LP of the warm start"):
            return
        seen.add(key)
        lp = net.watch(highs_backend.solve(_with_y(milp, values).relaxed(), time_limit_s=net.left(), gap=1.0),
                       "a serving-set LP of the warm start")
        if lp.x is not None:
            out.append((lp.objective, values, lp.x))

    served = (lp_x[y.start:y.stop] > 1e-6).astype(float)
    evaluate(served)
    evaluate((lp_x[y.start:y.stop] >= 0.5).astype(float))
    if not out:  # the net left no time to price any: the LP's own, unpriced
        return [(lp_value, served, lp_x)]
    best = min(out, key=lambda item: item[0])[1]
    for i in range(y.size):
        flipped = best.copy()
        flipped[i] = 1.0 - flipped[i]
        evaluate(flipped)
    return sorted(out, key=lambda item: item[0])


class _ReservedLp:
    """The block's LP with rounded capacity cuts and y fixed, kept loaded so that a reserved
    vector is priced by changing R's bounds and re-solving from the previous basis."""

    def __init__(self, milp: Milp, y_values: np.ndarray, net: SafetyNet, relaxation: highs_backend.LoadedLp) -> None:
        self.lp = relaxation
        if y_values.size:
            y = milp.cols["y"]
            relaxation.set_bounds(np.arange(y.start, y.stop), y_values, y_values)
        self.r = milp.cols["R"]
        self.net = net
        self.index = np.arange(self.r.start, self.r.stop)
        self.values: dict[bytes, float] = {}
        self.slopes: dict[bytes, np.ndarray] = {}

    @property
    def exhausted(self) -> bool:
        return len(self.values) >= DESCENT_EVALUATIONS

    def value(self, reserved: np.ndarray) -> float:
        """The cut LP's value with R fixed to ``reserved`` (inf once the evaluations are used up)."""
        key = reserved.astype(np.int64).tobytes()
        if key not in self.values:
            if self.exhausted or self.net.skip("a reserved-vector LP of the warm start"):
                return math.inf
            self.lp.set_bounds(self.index, reserved, reserved)
            outcome = self.net.watch(self.lp.solve(self.net.left()), "a reserved-vector LP of the warm start")
            optimal = outcome.status == SolveStatus.OPTIMAL
            self.values[key] = outcome.objective if optimal else math.inf
            if optimal:
                self.slopes[key] = self.lp.reduced_costs(self.index)
        return self.values[key]

    def slope(self, reserved: np.ndarray) -> np.ndarray | None:
        """A subgradient of the LP's value in R at ``reserved`` (after :meth:`value`), None if unknown."""
        return self.slopes.get(reserved.astype(np.int64).tobytes())


def _reserved_candidates(milp: Milp, search: _ReservedLp, start: np.ndarray,
                         movable: np.ndarray) -> tuple[list[tuple[float, np.ndarray]], tuple[float, np.ndarray]]:
    """The ``RESERVED_CANDIDATES`` best reserved vectors the descent priced, best first, and where ±1 moves
    alone came to rest, with its value.

    The descent takes ±1 moves until none improves, then swaps too (:func:`_moves`). The cut LP
    only ranks vectors: a swap's lower value can still complete to a dearer plan, so the
    ±1 rest is completed as well (``warm_start``), and the better plan kept.
    """
    single = _descend(milp, search, start, movable, swaps=False)
    _descend(milp, search, single, movable)
    ranked = sorted((v, key) for key, v in search.values.items() if math.isfinite(v))
    best = [(value, np.frombuffer(key, dtype=np.int64).astype(float)) for value, key in ranked[:RESERVED_CANDIDATES]]
    return best, (search.value(single), single)


def _chosen_trials(trials: list[tuple[float, int, Milp]], count: int,
                   rests: list[tuple[float, int, Milp]]) -> list[tuple[float, int, Milp]]:
    """The ``count`` trials of lowest cut-LP value, and the best ±1 rest when it is not one of them; lowest first."""
    chosen = sorted(trials, key=lambda item: item[:2])[:count]
    rest = min(rests, key=lambda item: item[:2]) if rests else None
    if rest is not None and all(not np.array_equal(trial.col_lo, rest[2].col_lo) for _, _, trial in chosen):
        chosen = sorted([*chosen, rest], key=lambda item: item[:2])
    return chosen


def _steady_reserved(milp: Milp, outcome: SolveOutcome) -> SolveOutcome:
    """The plan with its steady on-demand replicas bought reserved where that is cheaper (``steady.py``)."""
    x = reserve_steady_replicas(milp, outcome.x)  # type: ignore[arg-type]  # a plan has a point
    objective = float(milp.c @ x) + milp.offset
    return replace(outcome, x=x, objective=objective) if objective < outcome.objective - 1e-9 else outcome


def _moves(milp: Milp, movable: np.ndarray, swaps: bool = True) -> list[np.ndarray]:
    """The descent's moves on R: ±1 replica on one movable unit, and with ``swaps`` one replica
    moved between two movable units of the same region (a pool changing SKU or TP at its size)."""
    n = milp.cols["R"].size
    eye = np.eye(n)
    units = np.flatnonzero(movable)
    region = milp.instance.unit_region[milp.cols["R"].index["u"]]
    moves = [step * eye[i] for i in units for step in (-1.0, 1.0)]
    if swaps:
        moves += [eye[j] - eye[i] for i in units for j in units if i != j and region[i] == region[j]]
    return moves


def _descend(milp: Milp, lp: _ReservedLp, start: np.ndarray, movable: np.ndarray, swaps: bool = True) -> np.ndarray:
    """Steepest descent on the cut LP's value over reserved vectors (moves: :func:`_moves`); returns where it rests.

    The swap matters where a region's floor is met by a mix: the LP holds a pool at its floor
    of two replicas with 1.5 of one unit and 0.5 of a larger one, and neither ±1 move from two
    of the smaller improves, while one of each does.

    The LP's value V is convex in R, and the reduced cost g of a fixed R column is a
    subgradient, so V(R + δ) ≥ V(R) + g·δ: a move whose first-order change is not
    negative cannot improve and is not priced. The steepest move is the same; the
    evaluations saved let the descent go further.
    """
    r = milp.cols["R"]
    lo, hi = milp.col_lo[r.start:r.stop], milp.col_hi[r.start:r.stop]
    current: np.ndarray = np.clip(start, lo, hi)
    value = lp.value(current)
    moves = _moves(milp, movable, swaps)
    while not lp.exhausted:
        best, best_value = None, value
        slope = lp.slope(current)
        for move in moves:
            trial = current + move
            if (trial < lo).any() or (trial > hi).any():
                continue
            if slope is not None and float(slope @ move) > -1e-6:
                continue  # V(trial) ≥ V(current) + g · move ≥ V(current)
            v = lp.value(trial)
            if v < best_value - 1e-6:
                best, best_value = trial, v
        if best is None:
            return current
        current, value = best, best_value
    return current


def warm_start(milp: Milp, lp: SolveOutcome, backend: str, gap: float, trial_nodes: int,
               net: SafetyNet, relaxation: highs_backend.LoadedLp | None = None) -> SolveOutcome | None:
    """The best plan among fixed-core MILPs: serving sets y by LP value, reserved vectors by
    cut-LP value (module docstring). None when no candidate gives a plan. ``relaxation`` is
    the block's cut LP, loaded and solved (its y and R bounds change here; None: loaded afresh).

    Every step is bounded by a count (``trial_nodes`` per MILP), so the same block gives
    the same warm start on any machine unless the safety net ``net`` expires.
    """
    if lp.x is None:  # no LP point to guide the search
        return None
    candidates = (_serving_candidates(milp, lp.x, lp.objective, net) if "y" in milp.cols
                  else [(lp.objective, np.zeros(0), lp.x)])
    by_period = PeriodSplit.of(group_cuts(milp))

    def solve(trial: Milp, what: str) -> SolveOutcome | None:
        core = by_period.core if by_period is not None else None
        # until a plan is at hand, the net does not stop the calls that make one
        within = net if best is not None else net.with_grace(PLAN_GRACE_S)
        if core is not None and np.array_equal(trial.col_lo[core], trial.col_hi[core]):
            outcome = by_period.complete(trial.col_lo[core], within)  # type: ignore[union-attr]
        else:
            outcome = within.watch(run_backend(backend, group_cuts(trial), time_limit_s=within.left(), gap=gap / 2,
                                               node_limit=trial_nodes), what)
        return _steady_reserved(milp, outcome) if outcome.status.has_solution else None

    trials: list[tuple[float, int, Milp]] = []  # (lower bound of the trial's MILP, order, trial)
    fallback: Milp | None = None
    consolidated: Milp | None = None
    best: SolveOutcome | None = None
    rests: list[tuple[float, int, Milp]] = []  # where ±1 moves alone came to rest, per serving set
    for lp_value, y_values, x_lp in candidates[:SERVING_SETS]:
        fixed = _with_y(milp, y_values) if y_values.size else milp
        if "R" not in milp.cols:
            trials.append((lp_value, len(trials), fixed))
            continue
        r = milp.cols["R"]
        if relaxation is None:
            relaxation = highs_backend.LoadedLp(group_cuts(milp).relaxed())
        search = _ReservedLp(milp, y_values, net, relaxation)
        start = np.rint(_round_reserved(fixed, x_lp, ROUNDING_SLACK).col_lo[r.start:r.stop])
        if fallback is None:
            fallback = _round_reserved(fixed, x_lp, FALLBACK_SLACK)
            consolidated = _consolidate_reserved(fixed, x_lp)
            if by_period is not None:
                # completed in seconds, before the descent's LPs: a plan is at hand, and it
                # prunes the ranked cores whose cut-LP value it already beats
                best, consolidated = solve(consolidated, "the warm start's rounded plan"), None
        movable = np.ones(r.size, dtype=bool)
        if y_values.size:
            served = [int(g) for g, on in zip(milp.cols["y"].index["r"], y_values, strict=True) if on > 0.5]
            movable = np.isin(milp.instance.unit_region[r.index["u"]], served)
        ranked, rest = _reserved_candidates(milp, search, start, movable)
        for value, values in ranked:
            trials.append((value, len(trials), _fixed(fixed, "R", values)))
        rests.append((rest[0], len(trials), _fixed(fixed, "R", rest[1])))

    if fallback is not None and by_period is None and milp.instance.n_periods > LONG_HORIZON_PERIODS:
        # a long horizon makes every MILP slow: the easiest one first, so a plan is at hand
        best, fallback = solve(fallback, "the warm start's rounded plan"), None
    count = TRIALS if by_period is None else TRIALS_BY_PERIOD
    for value, _, trial in _chosen_trials(trials, count, rests):
        if best is not None and value >= best.objective:
            break  # the trial's LP value bounds its MILP: no better plan left among the rest
        if net.skip("a warm-start MILP"):
            break
        attempt = solve(trial, "a warm-start MILP")
        if attempt is not None and (best is None or attempt.objective < best.objective):
            best = attempt
    # Completed period by period, a core costs a few seconds: the two roundings that leave
    # little on demand are tried too, as switching can make on-demand replicas dear. As a
    # MILP the generous rounding is the easiest, so it is solved when nothing else gave a plan.
    extra = [consolidated, fallback] if by_period is not None else [fallback] if best is None else []
    for core in extra:
        if core is None or (best is not None and net.skip("the warm start's rounded plan")):
            continue
        rounded = solve(core, "the warm start's rounded plan")
        if rounded is not None and (best is None or rounded.objective < best.objective):
            best = rounded
    return best
