r"""Valid inequalities that tighten the LP relaxation: rounded capacity cuts per region group.

The LP relaxation buys fractional replicas exactly where integer replicas must be rounded
up; that gap (4–7 % on the global scenario) is what a solver has to close by branching.
Part of it can be written down directly.

For a model m, a period t and a set G of serving regions, let F(G) be the (origin, class)
pairs whose every allowed region is in G: their demand has nowhere else to go. Pick a
reference unit u* in G and weights ρ_k = 1 / cap_{u*,k}. Every unit u in G carries at most
θ_u = max_k ρ_k·cap_uk "reference replicas" per steady replica and θ^S_u = φ·max_{k∈K^S} ρ_k·cap_uk
per spot replica (Mélange form, summed over classes), so

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

import numpy as np
import scipy.sparse as sp

from planner.placement.problem import Block, Milp


def _column_maps(milp: Milp) -> tuple[dict[int, int], np.ndarray, np.ndarray]:
    inst = milp.instance
    T = inst.n_periods
    reserved = {int(u): milp.cols["R"].start + i for i, u in enumerate(milp.cols["R"].index["u"])}
    on_demand = np.full((inst.n_units, T), -1, dtype=np.int64)
    block = milp.cols["D"]
    on_demand[block.index["u"], block.index["t"]] = block.start + np.arange(block.size)
    spot = np.full((inst.n_units, T), -1, dtype=np.int64)
    block = milp.cols["S"]
    spot[block.index["u"], block.index["t"]] = block.start + np.arange(block.size)
    return reserved, on_demand, spot


def _mir(a: np.ndarray, f: np.ndarray) -> np.ndarray:
    """MIR coefficients [n_units, n_live] of Σ a_j x_j ≥ β for each live period's fractional part f."""
    whole = np.floor(a)[:, None]
    part = (a - np.floor(a))[:, None]
    return whole + np.minimum(part, f[None, :]) / f[None, :]


def group_cuts(milp: Milp) -> Milp:
    """The MILP with the MIR rows above appended (block name ``mir``)."""
    inst = milp.instance
    T = inst.n_periods
    reserved, on_demand, spot = _column_maps(milp)
    steady_units = np.array(sorted(set(reserved) | set(np.flatnonzero((on_demand >= 0).any(axis=1)))), dtype=int)
    spot_units = np.flatnonzero((spot >= 0).any(axis=1))
    d = inst.demand_rps
    rows: list[np.ndarray] = []
    cols: list[np.ndarray] = []
    vals: list[np.ndarray] = []
    rhs: list[np.ndarray] = []
    n_rows = 0
    for m in milp.models:
        steady = steady_units[inst.unit_model[steady_units] == m]
        spots = spot_units[inst.unit_model[spot_units] == m]
        eligible: dict[tuple[int, int], frozenset[int]] = {}
        for o in range(len(inst.origins)):
            for k in range(len(inst.classes)):
                if d[o, m, k].sum() <= 0:
                    continue
                pool = np.concatenate([steady, spots]) if inst.spot_tolerant[k] else steady
                regions = {int(inst.unit_region[u]) for u in pool
                           if inst.eligible[o, k, inst.unit_region[u]] and inst.unit_cap_rps[u, k] > 0}
                eligible[(o, k)] = frozenset(regions)
        if not eligible:
            continue
        groups = sorted(set(eligible.values()) | {frozenset().union(*eligible.values())}, key=sorted)
        for group in groups:
            forced = [(o, k) for (o, k), regions in eligible.items() if regions and regions <= group]
            if not forced:
                continue
            ks = sorted({k for _, k in forced})
            members = steady[np.isin(inst.unit_region[steady], list(group))]
            spot_members = spots[np.isin(inst.unit_region[spots], list(group))]
            tolerant = [k for k in ks if inst.spot_tolerant[k]]
            demand = np.zeros((len(inst.classes), T))
            for o, k in forced:
                demand[k] += d[o, m, k]
            profiles: set[tuple[float, ...]] = set()
            for ref in members:
                caps = inst.unit_cap_rps[ref, ks]
                if (caps <= 0).any():
                    continue
                profile = tuple(np.round(caps, 9))
                if profile in profiles:
                    continue
                profiles.add(profile)
                rho = np.zeros(len(inst.classes))
                rho[ks] = 1.0 / caps
                theta = (inst.unit_cap_rps[members][:, ks] * rho[ks]).max(axis=1)
                theta_spot = (inst.spot_fraction * (inst.unit_cap_rps[spot_members][:, tolerant] * rho[tolerant])
                              .max(axis=1)) if tolerant and spot_members.size else np.zeros(0)
                # the base row, and the base row divided by φ (spot replicas of the reference's
                # profile then have coefficient 1, so the rounding falls on them)
                scales = [1.0] + ([inst.spot_fraction] if theta_spot.size and 0 < inst.spot_fraction < 1 else [])
                for delta in scales:
                    beta = rho @ demand / delta  # [T]
                    frac = beta - np.floor(beta)
                    live = np.flatnonzero((beta > 0) & (frac > 1e-6))
                    if live.size == 0:
                        continue
                    f = frac[live]
                    row_ids = n_rows + np.arange(live.size)
                    coef = _mir(theta / delta, f)
                    for i, u in enumerate(members):
                        if int(u) in reserved:
                            rows.append(row_ids)
                            cols.append(np.full(live.size, reserved[int(u)]))
                            vals.append(coef[i])
                        ok = on_demand[u, live] >= 0
                        rows.append(row_ids[ok])
                        cols.append(on_demand[u, live][ok])
                        vals.append(coef[i][ok])
                    if theta_spot.size:
                        coef_spot = _mir(theta_spot / delta, f)
                        for i, u in enumerate(spot_members):
                            ok = spot[u, live] >= 0
                            rows.append(row_ids[ok])
                            cols.append(spot[u, live][ok])
                            vals.append(coef_spot[i][ok])
                    rhs.append(np.ceil(beta[live]))
                    n_rows += live.size
    if n_rows == 0:
        return milp
    r, c, v = np.concatenate(rows), np.concatenate(cols), np.concatenate(vals)
    keep = v > 0
    cuts = sp.csr_matrix((v[keep], (r[keep], c[keep])), shape=(n_rows, milp.n_cols))
    blocks = dict(milp.rows)
    blocks["mir"] = Block("mir", milp.n_rows, n_rows, {"cut": np.arange(n_rows)})
    return Milp(milp.instance, milp.c, milp.cost_usd, sp.vstack([milp.A, cuts], format="csr"),
                np.concatenate([milp.row_lo, np.concatenate(rhs)]),
                np.concatenate([milp.row_hi, np.full(n_rows, np.inf)]),
                milp.col_lo, milp.col_hi, milp.integer, milp.cols, blocks, milp.models, milp.offset)
