r"""Valid inequalities that tighten the LP relaxation: rounded capacity cuts per region group.

The LP relaxation buys fractional replicas exactly where integer replicas must be rounded
up; that gap is what a solver has to close by branching.
Part of it can be written down directly.

For a model m, a period t and a set G of serving regions, let F(G) be the (origin, class)
pairs whose every allowed region is in G: their demand has nowhere else to go. Pick a
reference unit u* in G and weights ρ_k = 1 / cap_{u*,k}. Every unit u in G carries at most
θ_u = ĝ_u·max_k ρ_k·cap_uk "reference replicas" per steady replica, ĝ_u its largest pool gain
(1 without), and θ^S_u = φ·max_{k∈K^S} ρ_k·cap_uk per spot replica (Mélange form, summed over classes), so

    Σ_{u∈G} θ_u (R_u + D_ut) + Σ_{u∈G} θ^S_u S_ut ≥ β_t = Σ_{(o,k)∈F(G)} ρ_k d_omkt

holds for every feasible plan. With integer replicas, its mixed-integer rounding (MIR) is
valid too: with f = β_t − ⌊β_t⌋ > 0 and a coefficient a split as ⌊a⌋ + f_a,

    Σ_j (⌊a_j⌋ + min(f_{a_j}, f) / f) x_j ≥ ⌈β_t⌉,

which for a single unit type reads "at least ⌈β_t⌉ replicas", the rounding the LP skips.
Each row is also added divided by φ (when spot is offered and 0 < φ < 1) before the
rounding: the spot replicas of the reference's profile then have coefficient 1, and the
MIR of 2R + 2D + S ≥ 2β_t (φ = ½) rounds the spot fleet of each hour up where the
plain row rounds the steady fleet. Dividing a valid row by a positive number keeps it
valid, so the MIR of the divided row is valid too.

Groups are the allowed-region sets E_ok of each demanded (origin, class) and their
union; references are the units of G with distinct capacity profiles. What the rows buy on
the global scenario, and where they do not pay: ``docs/decisions/0005-placement-blocks-cuts-and-warm-starts.md``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp

from planner.placement.instance import PlacementInstance
from planner.placement.milp import Block, Milp


class _Columns(NamedTuple):
    """Replica columns by unit: R by u, D and S by [u, t] (-1: no column)."""

    reserved: dict[int, int]
    on_demand: np.ndarray
    spot: np.ndarray


def _column_maps(milp: Milp) -> _Columns:
    inst = milp.instance
    T = inst.n_periods
    reserved = {int(u): milp.cols["R"].start + i for i, u in enumerate(milp.cols["R"].index["u"])}
    on_demand = np.full((inst.n_units, T), -1, dtype=np.int64)
    block = milp.cols["D"]
    on_demand[block.index["u"], block.index["t"]] = block.start + np.arange(block.size)
    spot = np.full((inst.n_units, T), -1, dtype=np.int64)
    block = milp.cols["S"]
    spot[block.index["u"], block.index["t"]] = block.start + np.arange(block.size)
    return _Columns(reserved, on_demand, spot)


def _mir(a: np.ndarray, f: np.ndarray) -> np.ndarray:
    """MIR coefficients [n_units, n_live] of Σ a_j x_j ≥ β for each live period's fractional part f."""
    whole = np.floor(a)[:, None]
    part = (a - np.floor(a))[:, None]
    coefficients: np.ndarray = whole + np.minimum(part, f[None, :]) / f[None, :]
    return coefficients


@dataclass
class _Rows:
    """MIR rows as (row, column, value) triplets and right-hand sides, in the order they are made."""

    rows: list[np.ndarray] = field(default_factory=list)
    cols: list[np.ndarray] = field(default_factory=list)
    vals: list[np.ndarray] = field(default_factory=list)
    rhs: list[np.ndarray] = field(default_factory=list)
    count: int = 0

    def add(self, rows: np.ndarray, cols: np.ndarray, vals: np.ndarray) -> None:
        self.rows.append(rows)
        self.cols.append(cols)
        self.vals.append(vals)


@dataclass(frozen=True)
class _Group:
    """One cut group G of model m: its steady and spot units and the demand with nowhere else to go."""

    classes: list[int]  # the classes of F(G)
    members: np.ndarray  # steady units in G
    spot_members: np.ndarray  # spot units in G
    tolerant: list[int]  # the spot-tolerant classes of F(G)
    demand: np.ndarray  # [k, t] demand of F(G)


def group_cuts(milp: Milp) -> Milp:
    """The MILP with the MIR rows above appended (block name ``mir``)."""
    inst = milp.instance
    maps = _column_maps(milp)
    reserved, on_demand, spot = maps
    steady_units = np.array(sorted(set(reserved) | set(np.flatnonzero((on_demand >= 0).any(axis=1)))), dtype=int)
    spot_units = np.flatnonzero((spot >= 0).any(axis=1))
    out = _Rows()
    for m in milp.models:
        steady = steady_units[inst.unit_model[steady_units] == m]
        spots = spot_units[inst.unit_model[spot_units] == m]
        eligible = _eligible_regions(inst, m, steady, spots)
        if not eligible:
            continue
        for group in sorted(set(eligible.values()) | {frozenset().union(*eligible.values())}, key=sorted):
            found = _group(inst, m, group, eligible, steady, spots)
            if found is not None:
                _group_rows(out, inst, found, maps)
    if out.count == 0:
        return milp
    return _with_rows(milp, out)


def _eligible_regions(inst: PlacementInstance, m: int, steady: np.ndarray,
                      spots: np.ndarray) -> dict[tuple[int, int], frozenset[int]]:
    """E_ok of each demanded (origin, class) of model m: the regions with a unit able to carry it."""
    d = inst.demand_rps
    eligible: dict[tuple[int, int], frozenset[int]] = {}
    for o in range(len(inst.origins)):
        for k in range(len(inst.classes)):
            if d[o, m, k].sum() <= 0:
                continue
            pool = np.concatenate([steady, spots]) if inst.spot_tolerant[k] else steady
            regions = {int(inst.unit_region[u]) for u in pool
                       if inst.eligible[o, k, inst.unit_region[u]] and inst.unit_cap_rps[u, k] > 0}
            eligible[(o, k)] = frozenset(regions)
    return eligible


def _group(inst: PlacementInstance, m: int, group: frozenset[int], eligible: dict[tuple[int, int], frozenset[int]],
           steady: np.ndarray, spots: np.ndarray) -> _Group | None:
    """The group G's units and the demand F(G) forces into it (None when F(G) is empty)."""
    forced = [(o, k) for (o, k), regions in eligible.items() if regions and regions <= group]
    if not forced:
        return None
    ks = sorted({k for _, k in forced})
    demand = np.zeros((len(inst.classes), inst.n_periods))
    for o, k in forced:
        demand[k] += inst.demand_rps[o, m, k]
    return _Group(classes=ks, members=steady[np.isin(inst.unit_region[steady], list(group))],
                  spot_members=spots[np.isin(inst.unit_region[spots], list(group))],
                  tolerant=[k for k in ks if inst.spot_tolerant[k]], demand=demand)


def _group_rows(out: _Rows, inst: PlacementInstance, group: _Group,
                maps: _Columns) -> None:
    """The MIR rows of one group, one reference per distinct capacity profile of its units."""
    ks, tolerant = group.classes, group.tolerant
    profiles: set[tuple[float, ...]] = set()
    for ref in group.members:
        caps = inst.unit_cap_rps[ref, ks]
        if (caps <= 0).any():
            continue
        profile = tuple(np.round(caps, 9))
        if profile in profiles:
            continue
        profiles.add(profile)
        rho = np.zeros(len(inst.classes))
        rho[ks] = 1.0 / caps
        # a steady replica in a pool carries up to its pool gain times its capacity (problem.py, Pools)
        theta = (inst.unit_cap_rps[group.members][:, ks] * rho[ks]).max(axis=1) * inst.pool_gain_max()[group.members]
        theta_spot = (inst.spot_fraction * (inst.unit_cap_rps[group.spot_members][:, tolerant] * rho[tolerant])
                      .max(axis=1)) if tolerant and group.spot_members.size else np.zeros(0)
        # the base row, and the base row divided by φ (spot replicas of the reference's
        # profile then have coefficient 1, so the rounding falls on them)
        scales = [1.0] + ([inst.spot_fraction] if theta_spot.size and 0 < inst.spot_fraction < 1 else [])
        for delta in scales:
            _scaled_rows(out, group, rho @ group.demand / delta, theta / delta, theta_spot / delta, maps)


def _scaled_rows(out: _Rows, group: _Group, beta: np.ndarray, theta: np.ndarray, theta_spot: np.ndarray,
                 maps: _Columns) -> None:
    """The MIR of Σ θ_u (R_u + D_ut) + Σ θ^S_u S_ut ≥ β_t in every period where β_t is fractional."""
    reserved, on_demand, spot = maps
    frac = beta - np.floor(beta)
    live = np.flatnonzero((beta > 0) & (frac > 1e-6))
    if live.size == 0:
        return
    f = frac[live]
    row_ids = out.count + np.arange(live.size)
    coef = _mir(theta, f)
    for i, u in enumerate(group.members):
        if int(u) in reserved:
            out.add(row_ids, np.full(live.size, reserved[int(u)]), coef[i])
        ok = on_demand[u, live] >= 0
        out.add(row_ids[ok], on_demand[u, live][ok], coef[i][ok])
    if theta_spot.size:
        coef_spot = _mir(theta_spot, f)
        for i, u in enumerate(group.spot_members):
            ok = spot[u, live] >= 0
            out.add(row_ids[ok], spot[u, live][ok], coef_spot[i][ok])
    out.rhs.append(np.ceil(beta[live]))
    out.count += live.size


def _with_rows(milp: Milp, cuts: _Rows) -> Milp:
    """The MILP with the cut rows appended as ≥ rows (zero coefficients dropped)."""
    n_rows = cuts.count
    r, c, v = np.concatenate(cuts.rows), np.concatenate(cuts.cols), np.concatenate(cuts.vals)
    keep = v > 0
    matrix = sp.csr_matrix((v[keep], (r[keep], c[keep])), shape=(n_rows, milp.n_cols))
    blocks = dict(milp.rows)
    blocks["mir"] = Block("mir", milp.n_rows, n_rows, {"cut": np.arange(n_rows)})
    return Milp(milp.instance, milp.c, milp.cost_usd, sp.vstack([milp.A, matrix], format="csr"),
                np.concatenate([milp.row_lo, np.concatenate(cuts.rhs)]),
                np.concatenate([milp.row_hi, np.full(n_rows, np.inf)]),
                milp.col_lo, milp.col_hi, milp.integer, milp.cols, blocks, milp.models, milp.offset)
