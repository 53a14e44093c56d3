r"""Independent parts of a model's placement: the components of its origin–region graph.

For a model m, let E_ok be the serving regions the demand of (origin o, class k) may reach
(residency, the latency budget of k, and a unit of m in the region with capacity for k).
Join two regions when one demanded E_ok contains both. The connected components C of that
graph split the model's MILP (``problem.py``) into blocks that share no row:

* a (demand) row's flows all go to regions of E_ok, inside one component;
* (route), (cap), (spotcap), (redundancy), (vub) and (switch) rows are per region or per
  unit, and (cover) rows per E_ok;
* (quota) rows are per (region, SKU): within one model they hold units of one region only.

So the model's optimum is the sum of its components' optima, and so is every lower bound
(a component's bound, HiGHS's or an LP's, is a bound on its part of the sum). Only the
quota rows shared with other models and the budget row couple the parts; ``solve.py``
joins them under those rows as it does for models. Regions whose units no demanded E_ok
reaches carry no flow; the optimum buys nothing there, so they are left out.

Why it pays: a component is a MILP a third to a half the size of the model's, with
regions whose reserved fleets round up independently, and HiGHS closes a small one by
branching where it only cuts at the root of the large one (figures:
``docs/decisions/0005-placement-blocks-cuts-and-warm-starts.md``).

A model with a demanded (origin, class) that no region can reach is not split: its single
block then shows the infeasibility.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from planner.placement.instance import PlacementInstance
from planner.placement.result import Fleet


@dataclass(frozen=True)
class Part:
    """One block: some models restricted to some regions, as an instance of its own.

    ``inst`` keeps the full instance's origins, regions, SKUs, models, classes and periods
    (so flows and quota arrays index the same way) but only the part's units and demand;
    ``units[i]`` is the full instance's index of the part's unit i.
    """

    models: tuple[int, ...]
    regions: tuple[int, ...]
    inst: PlacementInstance
    units: np.ndarray

    def label(self, full: PlacementInstance) -> tuple[tuple[str, ...], tuple[str, ...]]:
        return tuple(full.models[m] for m in self.models), tuple(full.regions[r] for r in self.regions)


def whole(inst: PlacementInstance, models: tuple[int, ...]) -> Part:
    """The given models in every region, unsplit (units of other models dropped)."""
    keep = np.isin(inst.unit_model, models)
    demand = np.zeros_like(inst.demand_rps)
    demand[:, list(models)] = inst.demand_rps[:, list(models)]
    regions = tuple(sorted({int(r) for r in inst.unit_region[keep]}))
    return Part(tuple(models), regions, replace(inst.restricted(keep), demand_rps=demand), np.flatnonzero(keep))


def reach(inst: PlacementInstance, m: int) -> dict[tuple[int, int], frozenset[int]]:
    """E_ok for every (origin, class) with demand of model m."""
    units = inst.unit_model == m
    out: dict[tuple[int, int], frozenset[int]] = {}
    for o in range(len(inst.origins)):
        for k in range(len(inst.classes)):
            if inst.demand_rps[o, m, k].sum() <= 0:
                continue
            able = units & (inst.unit_cap_rps[:, k] > 0) & inst.eligible[o, k, inst.unit_region]
            out[(o, k)] = frozenset(int(r) for r in inst.unit_region[able])
    return out


def components(inst: PlacementInstance, m: int) -> list[tuple[tuple[int, ...], list[tuple[int, int]]]]:
    """The components of model m: (regions, the (origin, class) pairs served there), in region order.

    Empty when some demanded (origin, class) reaches no region (the model is not split).
    """
    sets = reach(inst, m)
    if not sets or any(not regions for regions in sets.values()):
        return []
    found = _connected(sets.values())
    return [(regions, sorted(ok for ok, reached in sets.items() if min(reached) in regions)) for regions in found]


def _connected(sets: Iterable[frozenset[int]]) -> list[tuple[int, ...]]:
    """The connected components of the graph joining the regions of each set, each sorted, in region order."""
    groups = list(sets)
    regions = sorted({r for g in groups for r in g})
    position = {r: i for i, r in enumerate(regions)}
    edges = np.array([(position[min(g)], position[r]) for g in groups for r in g], dtype=np.int64).reshape(-1, 2)
    graph = sp.coo_matrix((np.ones(len(edges)), (edges[:, 0], edges[:, 1])), shape=(len(regions), len(regions)))
    _, labels = connected_components(graph, directed=False)
    members: dict[int, list[int]] = {}
    for r, label in zip(regions, labels.tolist(), strict=True):
        members.setdefault(label, []).append(r)
    return sorted(tuple(group) for group in members.values())


def split(inst: PlacementInstance, m: int) -> list[Part]:
    """Model m's blocks, one per component (one unsplit block when it cannot be split)."""
    found = components(inst, m)
    if len(found) <= 1:
        return [whole(inst, (m,))]
    parts = []
    for regions, pairs in found:
        keep = (inst.unit_model == m) & np.isin(inst.unit_region, regions)
        demand = np.zeros_like(inst.demand_rps)
        for o, k in pairs:
            demand[o, m, k] = inst.demand_rps[o, m, k]
        parts.append(Part((m,), regions, replace(inst.restricted(keep), demand_rps=demand), np.flatnonzero(keep)))
    return parts


def lift(inst: PlacementInstance, part: Part, fleet: Fleet) -> Fleet:
    """A part's fleet (in the part's unit indices) in the full instance's unit indices."""
    replicas = np.zeros((inst.n_units, *fleet.replicas.shape[1:]), dtype=fleet.replicas.dtype)
    replicas[part.units] = fleet.replicas
    loads = fleet.loads.copy()
    if loads.size:
        loads[:, 0] = part.units[loads[:, 0].astype(np.int64)]
    return Fleet(replicas, fleet.flows.copy(), loads)
