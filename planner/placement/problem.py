r"""The placement MILP, written out, and the code that builds it as sparse arrays.

Indices: periods t (weight h_t hours, H = Σ_t h_t); origins o; serving regions r; SKUs s;
models m; traffic classes k; units u = (r, s, g, m), g the TP degree (see ``instance.py``); tiers
reserved (R), on-demand (D), spot (S).

Data: d_omkt demand (req/s, the forecast quantile); E_ok the regions residency and
class k's latency budget allow for origin o (and that have a unit of m able to carry k);
cap_uk = utilisation_cap × max req/s of one replica of u for class k (no load variable
where it is 0); g_u GPUs per replica; p^τ_u USD per GPU-hour; Q_rst quota (GPUs; the same in
every period unless a residual quota is given); M_u = ⌊Q_rs / g_u⌋; N redundancy,
N' = max(N, 1); φ the reliable spot fraction; K^S the spot-tolerant classes; c_sw USD per
on-demand replica started or stopped; λ USD per request per ms of RTT; B the budget;
P the minimum replicas per pool; F = max(N, P, 1) a pool's replica floor; R^D the reserved
units also offered on demand; sustained = the horizon is shorter than the reserved term;
prev(t) the period before t (cyclic for hour-of-week blocks, none for the first hour).

Variables::

    R_u ∈ Z≥0, R_u ≤ M_u         reserved replicas, constant over the horizon
    D_ut, S_ut ∈ Z≥0, ≤ M_u       on-demand and spot replicas in period t
    f_ormkt ≥ 0, r ∈ E_ok         req/s of (o, m, k) routed to region r
    a_ukt ≥ 0                     req/s of class k carried by u's reserved + on-demand replicas
    b_ukt ≥ 0, k ∈ K^S            req/s of class k carried by u's spot replicas
    y_rm ∈ {0, 1}                 region r serves model m
    v_rmt ∈ {0, 1}                region r takes spot-tolerant traffic of m in period t (only when N = 0)
    w_ut ≥ 0                      on-demand replicas switched on or off     (only when c_sw > 0)
    q_utj ≥ 0, z_utj ∈ {0, 1}     pool step j of u in period t: q = R_u + D_ut when z = 1 (only with pool gains)
    e_omkt ≥ 0                    unserved demand                  (only in the elastic variant)

Minimise::

    Σ_u g_u [ H p^R_u R_u + Σ_t h_t (p^D_u D_ut + p^S_u S_ut) ]      rental, USD
      + c_sw Σ_ut w_ut                                                switching, USD
      + λ Σ 3600 h_t rtt_or f_ormkt                                   latency tie-break
      + P Σ 3600 h_t e_omkt                                           (elastic variant only)

subject to::

    (demand)     Σ_{r∈E_ok} f_ormkt + e_omkt = d_omkt               ∀ o,m,k,t with d > 0
    (route)      Σ_o f_ormkt = Σ_{u=(r,·,·,m)} (a_ukt + b_ukt)      ∀ r,m,k,t
    (cap)        Σ_k a_ukt / cap_uk ≤ R_u + D_ut + Σ_j Δ_uj q_utj   ∀ u,t    (Mélange form)
    (poolq)      q_utj ≤ R_u + D_ut                                 ∀ u,t,j  (pool gains only)
    (poolm)      q_utj ≤ M_u z_utj                                  ∀ u,t,j  (pool gains only)
    (poolz)      N_uj z_utj ≤ R_u + D_ut                            ∀ u,t,j  (pool gains only)
    (spotcap)    Σ_{k∈K^S} b_ukt / (φ cap_uk) ≤ S_ut                ∀ u,t
    (quota)      Σ_{u=(r,s,·,·)} g_u (R_u + D_ut + S_ut) ≤ Q_rst    ∀ r,s,t
    (redundancy) Σ_{u=(r,·,·,m)} (R_u + D_ut) ≥ F y_rm             ∀ r,m,t
    (pool)       Σ_{u=(r,·,·,m)} (R_u + D_ut + S_ut) ≥ P v_rmt      ∀ r,m,t  (only when N = 0)
    (sustained)  Σ_{u∈R^D,(r,·,·,m)} R_u − σ_m Σ_{u=(r,·,·,m),k} a_ukt / cap_uk ≤ F
                                                                    ∀ r,m,t  (when sustained)
    (vub)        f_ormkt ≤ d_omkt y_rm                              ∀ flows
    (cover)      Σ_{r∈E_ok} y_rm ≥ 1                                ∀ o,m,k with demand
    (switch)     w_ut ≥ D_ut − D_u,prev(t),  w_ut ≥ D_u,prev(t) − D_ut
    (budget)     rental + switching ≤ B

One replica serves a mix of classes: (cap) charges each class's load by the share of a
replica it uses (Mélange, Griggs et al. 2024). Spot carries only spot-tolerant classes and
counts φ of its rate. A region serves a model when it takes any of its traffic (vub); it
then keeps at least F = max(N, P, 1) reserved or on-demand replicas of it in every period. Spot replicas
do not count toward N: a region's spot capacity can be reclaimed all at once, so it gives
no redundancy. With N = 0 the rows still ask for F steady replicas wherever flows of a
class that may not use spot arrive (spot-tolerant flows then bind to v, not y). (cover) is implied
by (demand) and (vub) for integer y; it is there because it makes the LP relaxation pay for
at least one serving region per demand. The switching cost applies to on-demand replicas
only (model load time on start-up, and the churn of stopping); spot capacity is reclaimed
and restarted by the cloud regardless.

Pools. Where the capacity table was calibrated at several pool sizes, a pool of n steady
replicas of u carries n · g_u(n) replicas' worth at cap_uk, with g_u(n) = g_uj for the largest
calibrated size N_uj ≤ n (1 below the first; ``planner/calibrate/pools.py``), g non-decreasing.
With Δ_uj = g_uj − g_u,j−1 (g_u0 = 1), n + Σ_j Δ_uj q_utj with q_utj ≤ n and q_utj = 0 unless
n ≥ N_uj (z_utj) is at most n + Σ_{N_uj ≤ n} Δ_uj n = n · g_u(n), and the program reaches it by
setting z where n allows: (cap) charges a pool exactly its tabulated capacity. Spot replicas
keep the smallest size's capacity (a cloud can reclaim them all at once), and each (SKU, TP) of
a mixed pool counts its own replicas: the pool of several units carries at least the sum of its
parts. Only steady units with a gain get the columns; without one the program is as before.

A serving pool keeps at least P replicas in every period of the horizon, so that no pool
is a one-replica fragment. They are steady replicas, as for N: a spot replica cannot carry
the classes that may not use spot, so an idle spot replica would be no second replica for
them. With N = 0, spot-tolerant flows bind to v_rmt instead of y: a pool that takes such
flows in period t keeps P replicas of any tier (spot counts) in that period only (pool),
so a spot-tolerant pool may still scale to zero in the hours it is idle.

Reserved replicas and their term. A reserved replica is a commitment of the scenario's
``reserved_term`` at the catalog's reserved price per GPU-hour: its count is the same in
every period and the horizon is charged H p^R, the term's cost prorated to the horizon.
A commitment pays only where the replica is used for at least the break-even utilisation
p^R / p^D of the term. When the horizon covers the term, the program weighs this itself.
When it is shorter, the forecast says nothing about the rest of the term, and a fleet sized
to the horizon's peak hours could commit the whole peak for a year on two weeks of
evidence. So (sustained) lets a pool's reserved replicas cover only its steady load in
its quietest period (in replicas at the utilisation cap) plus its floor F: the level the
forecast sustains through the whole horizon, which is the best evidence of what persists.
On a history too short for the term the load counted is scaled by σ_m ≤ 1, so that the
model's quietest period counts no more than the history's steady load
(``reserved.py``, ``reserved_load_scale``).
Peaks go to on-demand or spot. Reserved units with no on-demand offer are exempt: reserved
is their only way to run. (``docs/decisions/0018-reserved-capacity-and-its-term.md``.)

Rows that cannot bind are left out: a quota row whose units cannot reach it even with
every replica column at M_u. The variable and row blocks keep their index arrays, so a
solution maps back to (u, t) and (o, r, m, k, t), and names are made from indices only
when a backend or an LP/MPS dump needs them (``col_names``, ``row_names``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from planner.contracts import TIER_NAMES as TIERS
from planner.placement.instance import PlacementInstance
from planner.placement.milp import Block, Milp
from planner.placement.strengthen import group_cuts

__all__ = ["ELASTIC_PENALTY_USD_PER_REQUEST", "Block", "Milp", "formulate", "with_budget"]

ELASTIC_PENALTY_USD_PER_REQUEST = 10.0
"""Price of one unserved request in the elastic variant: far above any rental cost per request."""

Values = np.ndarray | float


class _Builder:
    """Collects column blocks, row blocks and matrix entries in the order they are added."""

    def __init__(self) -> None:
        self.n_cols = 0
        self.n_rows = 0
        self.cols: dict[str, Block] = {}
        self.rows: dict[str, Block] = {}
        self.col_parts: list[tuple[np.ndarray, ...]] = []
        self.row_parts: list[tuple[np.ndarray, np.ndarray]] = []
        self.entries: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []

    def add_cols(self, name: str, index: dict[str, np.ndarray], cost: Values, hi: Values,
                 integer: bool, usd: Values | None = None) -> Block:
        size = len(next(iter(index.values())))
        block = Block(name, self.n_cols, size, index)
        self.cols[name] = block
        self.n_cols += size
        cost = np.broadcast_to(np.asarray(cost, dtype=float), (size,))
        usd = cost if usd is None else np.broadcast_to(np.asarray(usd, dtype=float), (size,))
        self.col_parts.append((cost, usd, np.broadcast_to(np.asarray(hi, dtype=float), (size,)),
                               np.full(size, integer)))
        return block

    def add_rows(self, name: str, index: dict[str, np.ndarray], lo: Values, hi: Values) -> Block:
        size = len(next(iter(index.values())))
        block = Block(name, self.n_rows, size, index)
        self.rows[name] = block
        self.n_rows += size
        self.row_parts.append((np.broadcast_to(np.asarray(lo, dtype=float), (size,)),
                               np.broadcast_to(np.asarray(hi, dtype=float), (size,))))
        return block

    def add(self, rows: np.ndarray, cols: np.ndarray, values: Values) -> None:
        rows, cols = np.asarray(rows, dtype=np.int64), np.asarray(cols, dtype=np.int64)
        self.entries.append((rows, cols, np.broadcast_to(np.asarray(values, dtype=float), rows.shape)))

    def build(self, instance: PlacementInstance, models: tuple[int, ...]) -> Milp:
        c, usd, hi, integer = (np.concatenate([p[i] for p in self.col_parts]) for i in range(4))
        lo_rows = np.concatenate([p[0] for p in self.row_parts]) if self.row_parts else np.zeros(0)
        hi_rows = np.concatenate([p[1] for p in self.row_parts]) if self.row_parts else np.zeros(0)
        r, k, v = (np.concatenate([e[i] for e in self.entries]) for i in range(3))
        A = sp.csr_matrix((v, (r, k)), shape=(self.n_rows, self.n_cols))
        A.sum_duplicates()
        return Milp(instance, c, usd, A, lo_rows, hi_rows, np.zeros(len(c)), hi, integer.astype(bool),
                    self.cols, self.rows, models)


def _grid(*sizes: int) -> list[np.ndarray]:
    return [g.ravel() for g in np.meshgrid(*[np.arange(n) for n in sizes], indexing="ij")]


@dataclass(frozen=True)
class _Replicas:
    """The replica columns R, D, S and the units each tier is offered for."""

    R: Block
    D: Block
    S: Block
    reserved: np.ndarray  # units with an R column
    on_demand: np.ndarray  # units with D columns
    spot: np.ndarray  # units with S columns

    def steady(self, units: np.ndarray) -> np.ndarray:
        """The units in ``units`` with reserved or on-demand columns."""
        return units[np.isin(units, np.union1d(self.reserved, self.on_demand))]

    def touching(self, T: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(column, u, t) of every replica column in period t, reserved repeated in every period."""
        ui, ti = _grid(len(self.reserved), T)
        col = np.concatenate([self.R.start + ui, self.D.start + np.arange(self.D.size),
                              self.S.start + np.arange(self.S.size)])
        u = np.concatenate([self.reserved[ui], self.D.index["u"], self.S.index["u"]])
        t = np.concatenate([ti, self.D.index["t"], self.S.index["t"]])
        return col, u, t


@dataclass(frozen=True)
class _Flows:
    """The flow columns f and the key of the route row each one feeds."""

    f: Block
    route: Block
    route_keys: np.ndarray  # sorted keys ((r · M + m) · K + k) · T + t of the route rows


def formulate(
    inst: PlacementInstance,
    models: tuple[int, ...] | None = None,
    *,
    budget: bool = True,
    elastic: bool = False,
    cuts: bool = True,
) -> Milp:
    """Build the MILP above for the given models (default: all); quota rows always use the full Q_rs."""
    models = tuple(range(len(inst.models))) if models is None else tuple(models)
    units = np.flatnonzero(np.isin(inst.unit_model, models))
    b = _Builder()
    reps = _replica_columns(b, inst, units)
    flows = _flow_columns(b, inst, models, units, reps, elastic)
    a = _load_columns(b, inst, flows, reps.steady(units), np.ones(len(inst.classes), dtype=bool), "a")
    spot_loads = _load_columns(b, inst, flows, reps.spot, inst.spot_tolerant, "b")
    _capacity_rows(b, inst, units, reps, a, spot_loads)
    rep_col, rep_u, rep_t = reps.touching(inst.n_periods)
    _quota_rows(b, inst, units, reps, rep_col, rep_u, rep_t)
    _serving_rows(b, inst, units, flows.f, reps, rep_col, rep_u, rep_t, elastic)
    _sustained_rows(b, inst, units, reps, a)
    _switching_rows(b, inst, reps.D)
    milp = b.build(inst, models)
    if cuts:
        milp = group_cuts(milp)
    if budget and inst.budget_usd is not None:
        milp = with_budget(milp, inst.budget_usd)
    return milp


def _replica_columns(b: _Builder, inst: PlacementInstance, units: np.ndarray) -> _Replicas:
    """R_u, D_ut and S_ut for the units offered on each enabled tier (spot only where φ > 0)."""
    T, h = inst.n_periods, inst.periods.hours
    cost_per_hour = inst.unit_gpus[:, None] * inst.unit_price  # [u, tier] USD per replica-hour
    tier_on = {t: t in inst.tiers for t in TIERS}
    rsv = units[inst.offered("reserved")[units]] if tier_on["reserved"] else units[:0]
    R = b.add_cols("R", {"u": rsv}, inst.total_hours * cost_per_hour[rsv, 0], inst.unit_max_replicas[rsv], True)
    ond = units[inst.offered("on_demand")[units]] if tier_on["on_demand"] else units[:0]
    ui, ti = _grid(len(ond), T)
    D = b.add_cols("D", {"u": ond[ui], "t": ti}, h[ti] * cost_per_hour[ond[ui], 1],
                   inst.unit_max_replicas[ond[ui]], True)
    use_spot = tier_on["spot"] and inst.spot_fraction > 0
    spt = units[inst.spot_usable()[units]] if use_spot else units[:0]
    ui, ti = _grid(len(spt), T)
    S = b.add_cols("S", {"u": spt[ui], "t": ti}, h[ti] * cost_per_hour[spt[ui], 2],
                   inst.unit_max_replicas[spt[ui]], True)
    return _Replicas(R, D, S, rsv, ond, spt)


def _flow_columns(b: _Builder, inst: PlacementInstance, models: tuple[int, ...], units: np.ndarray,
                  reps: _Replicas, elastic: bool) -> _Flows:
    """(demand) rows, flow columns to the eligible regions that run (m, k), slack columns and (route) rows."""
    T, n_r, n_m, n_k = inst.n_periods, len(inst.regions), len(inst.models), len(inst.classes)
    runs = np.zeros((n_r, n_m, n_k), dtype=bool)  # region r has a unit of m that can carry k
    steady = np.isin(units, np.union1d(reps.reserved, reps.on_demand))[:, None]
    on_spot = np.isin(units, reps.spot)[:, None] & inst.spot_tolerant[None, :]
    np.logical_or.at(runs, (inst.unit_region[units], inst.unit_model[units]),
                     (inst.unit_cap_rps[units] > 0) & (steady | on_spot))
    d = inst.demand_rps
    oi, mi, ki, ti = np.nonzero(d)
    keep = np.isin(mi, models)
    oi, mi, ki, ti = oi[keep], mi[keep], ki[keep], ti[keep]
    dem = b.add_rows("demand", {"o": oi, "m": mi, "k": ki, "t": ti}, d[oi, mi, ki, ti], d[oi, mi, ki, ti])
    reach = inst.eligible[oi, ki] & runs[:, mi, ki].T  # [demand row, r]
    row_i, ri = np.nonzero(reach)
    seconds = 3600.0 * inst.periods.hours
    f = b.add_cols("f", {"o": oi[row_i], "r": ri, "m": mi[row_i], "k": ki[row_i], "t": ti[row_i]},
                   inst.latency_penalty * seconds[ti[row_i]] * inst.rtt_ms[oi[row_i], ri], np.inf, False, usd=0.0)
    b.add(dem.start + row_i, f.start + np.arange(f.size), 1.0)
    if elastic:
        e = b.add_cols("e", {"o": oi, "m": mi, "k": ki, "t": ti}, ELASTIC_PENALTY_USD_PER_REQUEST * seconds[ti],
                       np.inf, False, usd=0.0)
        b.add(dem.start + np.arange(dem.size), e.start + np.arange(e.size), 1.0)
    key = ((f.index["r"] * n_m + f.index["m"]) * n_k + f.index["k"]) * T + f.index["t"]
    route_keys, f_route = np.unique(key, return_inverse=True)
    rr, rem = np.divmod(route_keys, n_m * n_k * T)
    rm, rem = np.divmod(rem, n_k * T)
    rk, rt = np.divmod(rem, T)
    route = b.add_rows("route", {"r": rr, "m": rm, "k": rk, "t": rt}, 0.0, 0.0)
    b.add(route.start + f_route, f.start + np.arange(f.size), 1.0)
    return _Flows(f, route, route_keys)


def _load_columns(b: _Builder, inst: PlacementInstance, flows: _Flows, pool: np.ndarray, classes_ok: np.ndarray,
                  name: str) -> Block:
    """Load columns (u, k, t) for units in ``pool`` whose (r, m, k, t) has a route row."""
    T, n_m, n_k = inst.n_periods, len(inst.models), len(inst.classes)
    route_keys = flows.route_keys
    uu, kk, tt = _grid(len(pool), n_k, T)
    uu = pool[uu]
    ok = (inst.unit_cap_rps[uu, kk] > 0) & classes_ok[kk]
    uu, kk, tt = uu[ok], kk[ok], tt[ok]
    keys = ((inst.unit_region[uu] * n_m + inst.unit_model[uu]) * n_k + kk) * T + tt
    pos = np.searchsorted(route_keys, keys)
    if route_keys.size:
        hit = (pos < len(route_keys)) & (route_keys[np.minimum(pos, len(route_keys) - 1)] == keys)
    else:
        hit = np.zeros(keys.size, dtype=bool)
    uu, kk, tt, pos = uu[hit], kk[hit], tt[hit], pos[hit]
    block = b.add_cols(name, {"u": uu, "k": kk, "t": tt}, 0.0, np.inf, False)
    b.add(flows.route.start + pos, block.start + np.arange(block.size), -1.0)
    return block


def _unit_period_rows(b: _Builder, inst: PlacementInstance, name: str, pool: np.ndarray) -> np.ndarray:
    """One ≤ 0 row per (u, t) of ``pool``; returns the [u, t] -> row lookup (-1: no row)."""
    T = inst.n_periods
    lookup = np.full((inst.n_units, T), -1, dtype=np.int64)
    ui, ti = _grid(len(pool), T)
    block = b.add_rows(name, {"u": pool[ui], "t": ti}, -np.inf, 0.0)
    lookup[pool[ui], ti] = block.start + np.arange(block.size)
    return lookup


def _capacity_rows(b: _Builder, inst: PlacementInstance, units: np.ndarray, reps: _Replicas, a: Block,
                   spot_loads: Block) -> None:
    """(cap) and (spotcap): each class's load charged by its share of a replica (Mélange form)."""
    cap_row = _unit_period_rows(b, inst, "cap", reps.steady(units))
    b.add(cap_row[a.index["u"], a.index["t"]], a.start + np.arange(a.size),
          1.0 / inst.unit_cap_rps[a.index["u"], a.index["k"]])
    ui, ti = _grid(len(reps.reserved), inst.n_periods)
    b.add(cap_row[reps.reserved[ui], ti], reps.R.start + ui, -1.0)
    D, S = reps.D, reps.S
    b.add(cap_row[D.index["u"], D.index["t"]], D.start + np.arange(D.size), -1.0)
    _pool_gain_rows(b, inst, reps.steady(units), reps, cap_row)
    spot_row = _unit_period_rows(b, inst, "spotcap", reps.spot)
    bs = spot_loads
    b.add(spot_row[bs.index["u"], bs.index["t"]], bs.start + np.arange(bs.size),
          1.0 / (inst.spot_fraction * inst.unit_cap_rps[bs.index["u"], bs.index["k"]]))
    b.add(spot_row[S.index["u"], S.index["t"]], S.start + np.arange(S.size), -1.0)


def _pool_gain_rows(b: _Builder, inst: PlacementInstance, steady: np.ndarray, reps: _Replicas,
                    cap_row: np.ndarray) -> None:
    """(poolq), (poolm) and (poolz), and each step's gain in (cap): a pool of n steady replicas carries n · g(n).

    With the steps fixed (``inst.unit_pool_step``), one q per (u, t) at a fixed step s: q ≤ n, N_s ≤ n,
    and (cap) gains (g_s − 1) q, no binaries.
    """
    if inst.unit_pool_size is None or inst.unit_pool_gain is None:
        return
    if inst.unit_pool_step is not None:
        _fixed_pool_rows(b, inst, steady, reps, cap_row)
        return
    T = inst.n_periods
    sizes, gains = inst.unit_pool_size[steady], inst.unit_pool_gain[steady]
    ui, ji = np.nonzero(sizes > 0)
    if ui.size == 0:
        return
    previous = np.where(ji > 0, gains[ui, np.maximum(ji - 1, 0)], 1.0)
    delta, size, u = gains[ui, ji] - previous, sizes[ui, ji], steady[ui]
    si, ti = _grid(ui.size, T)
    u_t, j_t, t = u[si], ji[si], ti
    most = inst.unit_max_replicas[u_t]
    index = {"u": u_t, "j": j_t, "t": t}
    q = b.add_cols("pool_q", index, 0.0, most, False, usd=0.0)
    z = b.add_cols("pool_z", index, 0.0, 1.0, True, usd=0.0)
    q_cols, z_cols = q.start + np.arange(q.size), z.start + np.arange(z.size)
    b.add(cap_row[u_t, t], q_cols, -delta[si])
    steady_cols = _SteadyColumns(inst, reps)
    at = _pool_rows_block(b, "poolq", index)  # q ≤ R + D
    b.add(at, q_cols, 1.0)
    steady_cols.subtract(b, at, u_t, t)
    at = _pool_rows_block(b, "poolm", index)  # q ≤ M z
    b.add(at, q_cols, 1.0)
    b.add(at, z_cols, -most.astype(float))
    at = _pool_rows_block(b, "poolz", index)  # N z ≤ R + D
    b.add(at, z_cols, size[si].astype(float))
    steady_cols.subtract(b, at, u_t, t)


def _fixed_pool_rows(b: _Builder, inst: PlacementInstance, steady: np.ndarray, reps: _Replicas,
                     cap_row: np.ndarray) -> None:
    """The pool rows with each (u, t)'s step fixed: (poolq) q ≤ R + D, (poolz) R + D ≥ N_s, (g_s − 1) q in (cap)."""
    assert inst.unit_pool_size is not None and inst.unit_pool_gain is not None and inst.unit_pool_step is not None
    step = inst.unit_pool_step[steady]
    ui, t = np.nonzero(step >= 0)
    if ui.size == 0:
        return
    s, u = step[ui, t], steady[ui]
    gain, size = inst.unit_pool_gain[u, s], inst.unit_pool_size[u, s]
    index = {"u": u, "j": s, "t": t}
    q = b.add_cols("pool_q", index, 0.0, inst.unit_max_replicas[u], False, usd=0.0)
    q_cols = q.start + np.arange(q.size)
    b.add(cap_row[u, t], q_cols, -(gain - 1.0))
    steady_cols = _SteadyColumns(inst, reps)
    at = _pool_rows_block(b, "poolq", index)  # q ≤ R + D
    b.add(at, q_cols, 1.0)
    steady_cols.subtract(b, at, u, t)
    block = b.add_rows("poolz", index, -np.inf, -size.astype(float))  # −(R + D) ≤ −N_s
    steady_cols.subtract(b, block.start + np.arange(block.size), u, t)


def _pool_rows_block(b: _Builder, name: str, index: dict[str, np.ndarray]) -> np.ndarray:
    block = b.add_rows(name, index, -np.inf, 0.0)
    return block.start + np.arange(block.size)


class _SteadyColumns:
    """R_u's and D_ut's columns (−1: none), to put − (R_u + D_ut) in pool rows."""

    def __init__(self, inst: PlacementInstance, reps: _Replicas) -> None:
        self.reserved = np.full(inst.n_units, -1, dtype=np.int64)
        self.reserved[reps.reserved] = reps.R.start + np.arange(reps.R.size)
        self.on_demand = np.full((inst.n_units, inst.n_periods), -1, dtype=np.int64)
        self.on_demand[reps.D.index["u"], reps.D.index["t"]] = reps.D.start + np.arange(reps.D.size)

    def subtract(self, b: _Builder, rows: np.ndarray, u: np.ndarray, t: np.ndarray) -> None:
        for cols in (self.reserved[u], self.on_demand[u, t]):
            b.add(rows[cols >= 0], cols[cols >= 0], -1.0)


def _quota_rows(b: _Builder, inst: PlacementInstance, units: np.ndarray, reps: _Replicas, rep_col: np.ndarray,
                rep_u: np.ndarray, rep_t: np.ndarray) -> None:
    """(quota) per (r, s, t), only where the units could exceed it with every replica column at M_u."""
    T, n_r, n_s = inst.n_periods, len(inst.regions), len(inst.skus)
    reach_gpus = np.zeros((n_r, n_s))
    tier_columns = np.zeros(inst.n_units)  # how many replica columns (R, D, S) of a unit count in one period
    for block in (reps.R, reps.D, reps.S):
        np.add.at(tier_columns, block.index["u"], 1.0 / (T if block.name != "R" else 1))
    np.add.at(reach_gpus, (inst.unit_region[units], inst.unit_sku[units]),
              inst.unit_gpus[units] * inst.unit_max_replicas[units] * tier_columns[units])
    quota_t = inst.quota_per_period()  # [r, s, t]
    binding = reach_gpus > quota_t.min(axis=2)
    rs_r, rs_s = np.nonzero(binding)
    if not rs_r.size:
        return
    qr, qt = _grid(len(rs_r), T)
    quota = b.add_rows("quota", {"r": rs_r[qr], "s": rs_s[qr], "t": qt}, -np.inf, quota_t[rs_r[qr], rs_s[qr], qt])
    lookup = np.full((n_r, n_s, T), -1, dtype=np.int64)
    lookup[rs_r[qr], rs_s[qr], qt] = quota.start + np.arange(quota.size)
    rows = lookup[inst.unit_region[rep_u], inst.unit_sku[rep_u], rep_t]
    ok = rows >= 0
    b.add(rows[ok], rep_col[ok], inst.unit_gpus[rep_u[ok]])


def _serving_rows(b: _Builder, inst: PlacementInstance, units: np.ndarray, f: Block, reps: _Replicas,
                  rep_col: np.ndarray, rep_u: np.ndarray, rep_t: np.ndarray, elastic: bool) -> None:
    """Serving indicators y_rm (and v_rm) with their (redundancy), (pool), (vub) and (cover) rows.

    With N >= 1 every flow needs y; with N = 0 only flows of classes that may not use spot
    need it, while the spot-tolerant flows need v. y needs F = max(N, P, 1) steady
    (reserved or on-demand) replicas in every period, v_rmt P replicas of any tier in t.
    """
    T, n_r, n_m = inst.n_periods, len(inst.regions), len(inst.models)
    pairs, unit_pair = np.unique(inst.unit_region[units] * n_m + inst.unit_model[units], return_inverse=True)
    pair_of_unit = np.full(inst.n_units, -1, dtype=np.int64)
    pair_of_unit[units] = unit_pair
    pair_r, pair_m = pairs // n_m, pairs % n_m
    pair_index = np.full((n_r, n_m), -1, dtype=np.int64)
    pair_index[pair_r, pair_m] = np.arange(len(pairs))
    pools = _Pools(pair_r, pair_m, pair_index, pair_of_unit[rep_u] * T + rep_t, rep_col)
    tolerant = inst.spot_tolerant[f.index["k"]]
    unbound = tolerant if inst.redundancy < 1 else np.zeros(tolerant.size, dtype=bool)  # flows that need no y
    if not pairs.size:
        return
    if (~unbound).any():
        y = b.add_cols("y", {"r": pair_r, "m": pair_m}, 0.0, 1.0, True)
        steady_rep = rep_col < reps.S.start  # reserved and on-demand columns come before spot
        pr, pt = _grid(len(pairs), T)
        red = b.add_rows("redundancy", {"r": pair_r[pr], "m": pair_m[pr], "t": pt}, 0.0, np.inf)
        b.add(red.start + pools.row_of_rep[steady_rep], rep_col[steady_rep], 1.0)
        b.add(red.start + np.arange(red.size), y.start + pr, -float(inst.pool_floor))
        _vub_rows(b, inst, f, np.flatnonzero(~unbound), y, pools, elastic)
    if unbound.any():
        pr, pt = _grid(len(pairs), T)
        v = b.add_cols("v", {"r": pair_r[pr], "m": pair_m[pr], "t": pt}, 0.0, 1.0, True)
        _pool_rows(b, inst, pools, v)
        _vub_rows(b, inst, f, np.flatnonzero(unbound), v, pools, elastic)


@dataclass(frozen=True)
class _Pools:
    """The (region, model) pairs of the block and where each replica column falls among them."""

    r: np.ndarray
    m: np.ndarray
    index: np.ndarray  # [r, m] -> pair (-1: none)
    row_of_rep: np.ndarray  # pair · T + t of each replica column in ``touching`` order
    rep_col: np.ndarray


def _pool_rows(b: _Builder, inst: PlacementInstance, pools: _Pools, v: Block) -> None:
    """(pool): Σ_{u=(r,·,·,m)} (R_u + D_ut + S_ut) ≥ P · v_rmt (v is indexed pair · T + t)."""
    T = inst.n_periods
    pr, pt = _grid(len(pools.r), T)
    rows = b.add_rows("pool_v", {"r": pools.r[pr], "m": pools.m[pr], "t": pt}, 0.0, np.inf)
    b.add(rows.start + pools.row_of_rep, pools.rep_col, 1.0)
    b.add(rows.start + np.arange(rows.size), v.start + np.arange(v.size), -float(inst.min_replicas_per_pool))


def _vub_rows(b: _Builder, inst: PlacementInstance, f: Block, sel: np.ndarray, indicator: Block, pools: _Pools,
              elastic: bool) -> None:
    """(vub) f ≤ d · indicator for the flows ``sel``, and (cover) unless demand may go unserved.

    The indicator is y_rm, or v_rmt when it has a period index.
    """
    pair = pools.index[f.index["r"][sel], f.index["m"][sel]]
    ind = indicator.start + (pair * inst.n_periods + f.index["t"][sel] if "t" in indicator.index else pair)
    fo, fm, fk, ft = (f.index[key][sel] for key in ("o", "m", "k", "t"))
    vub = b.add_rows(f"vub_{indicator.name}", {key: f.index[key][sel] for key in ("o", "r", "m", "k", "t")},
                     -np.inf, 0.0)
    n = np.arange(vub.size)
    b.add(vub.start + n, f.start + sel, 1.0)
    b.add(vub.start + n, ind, -inst.demand_rps[fo, fm, fk, ft])
    if elastic or "t" in indicator.index:
        return  # demand may go unserved, so no region has to serve it; (cover) is per horizon, v per period
    okm, okm_row = np.unique(np.stack([fo, fm, fk]), axis=1, return_inverse=True)
    cover = b.add_rows(f"cover_{indicator.name}", {"o": okm[0], "m": okm[1], "k": okm[2]}, 1.0, np.inf)
    cov = np.unique(np.stack([okm_row.ravel(), ind]), axis=1)
    b.add(cover.start + cov[0], cov[1], 1.0)


def _sustained_rows(b: _Builder, inst: PlacementInstance, units: np.ndarray, reps: _Replicas, a: Block) -> None:
    """(sustained): a pool's reserved replicas ≤ its steady load in every period + its replica floor.

    Only when the horizon is shorter than the reserved term, and only for reserved units
    that could run on demand instead (see the module docstring).
    """
    if not inst.reserved_sustained_only:
        return
    flexible = reps.reserved[np.isin(reps.reserved, reps.on_demand)]
    if not flexible.size:
        return
    T, n_m = inst.n_periods, len(inst.models)
    pairs = np.unique(inst.unit_region[flexible] * n_m + inst.unit_model[flexible])
    pair_of = np.full(len(inst.regions) * n_m, -1, dtype=np.int64)
    pair_of[pairs] = np.arange(len(pairs))
    pr, pt = _grid(len(pairs), T)
    rows = b.add_rows("sustained", {"r": pairs[pr] // n_m, "m": pairs[pr] % n_m, "t": pt}, -np.inf,
                      float(inst.pool_floor))
    r_pos = np.flatnonzero(np.isin(reps.reserved, flexible))
    ui, ti = _grid(len(r_pos), T)
    u = reps.reserved[r_pos[ui]]
    b.add(rows.start + pair_of[inst.unit_region[u] * n_m + inst.unit_model[u]] * T + ti, reps.R.start + r_pos[ui],
          1.0)
    au, ak, at = a.index["u"], a.index["k"], a.index["t"]
    pair = pair_of[inst.unit_region[au] * n_m + inst.unit_model[au]]
    ok = pair >= 0
    scale = np.ones(n_m) if inst.reserved_load_scale is None else inst.reserved_load_scale
    b.add(rows.start + pair[ok] * T + at[ok], a.start + np.flatnonzero(ok),
          -scale[inst.unit_model[au[ok]]] / inst.unit_cap_rps[au[ok], ak[ok]])


def _switching_rows(b: _Builder, inst: PlacementInstance, D: Block) -> None:
    """w_ut ≥ |D_ut − D_u,prev(t)| for on-demand replicas, when switching has a cost."""
    T = inst.n_periods
    if not (inst.switching_cost_usd > 0 and T > 1):
        return
    t = D.index["t"]
    has_prev = (t > 0) | inst.periods.cyclic
    cur = D.start + np.flatnonzero(has_prev)
    prev_t = (t[has_prev] - 1) % T
    prev = cur - t[has_prev] + prev_t
    w = b.add_cols("w" + D.name, {"u": D.index["u"][has_prev], "t": t[has_prev]}, inst.switching_cost_usd, np.inf,
                   False)
    for sign, name in ((1.0, "up"), (-1.0, "down")):
        rows = b.add_rows(f"switch{D.name}_{name}", w.index, 0.0, np.inf)
        n = np.arange(rows.size)
        b.add(rows.start + n, w.start + n, 1.0)
        b.add(rows.start + n, cur, -sign)
        b.add(rows.start + n, prev, sign)


def with_budget(milp: Milp, budget_usd: float) -> Milp:
    """Append the budget row: rental + switching cost ≤ budget_usd."""
    nz = np.flatnonzero(milp.cost_usd)
    row = sp.csr_matrix((milp.cost_usd[nz], (np.zeros(nz.size, dtype=np.int64), nz)), shape=(1, milp.n_cols))
    rows = dict(milp.rows)
    rows["budget"] = Block("budget", milp.n_rows, 1, {"one": np.zeros(1, dtype=np.int64)})
    return Milp(milp.instance, milp.c, milp.cost_usd, sp.vstack([milp.A, row], format="csr"),
                np.append(milp.row_lo, -np.inf), np.append(milp.row_hi, budget_usd), milp.col_lo, milp.col_hi,
                milp.integer, milp.cols, rows, milp.models, milp.offset)
