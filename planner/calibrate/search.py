r"""Bisection for the highest request rate per replica at which every SLO holds.

Given a predicate ok(λ) (:mod:`.probe`) and the analytic ceiling C of the mix, the search is

1. **Bracket.** lo = F = ``FLOOR_FRACTION`` · C, the floor, *not yet probed*; hi = C. While
   ok(hi) and fewer than ``MAX_GROWTHS`` growths: lo = hi, hi = ``GROWTH`` · hi. If ok(hi)
   still holds after the last growth, stop with λ* = hi (``growth_limit``: the SLOs hold
   beyond 1.5⁴ ≈ 5× the ceiling, which points at the profile).
2. **Bisect.** While hi − lo > rel_tol · hi: mid = (lo + hi) / 2; lo = mid if ok(mid) else hi = mid.
3. **Floor.** If no probe held (lo is still F), probe F now. If not ok(F), stop: the setting
   is infeasible (no rate down to 1 % of its throughput ceiling meets the SLOs), and the
   failing bound says which class and metric miss, by how much.
4. **Answer.** λ* = lo, the highest rate *verified* to meet every SLO; hi is the lowest rate
   seen to miss, and hi ≤ λ* / (1 − rel_tol).

The floor is probed last because it almost always holds and then decides nothing: the rates
visited in steps 1 and 2 depend only on verdicts above it, so where F holds the search visits
the same rates and gives the same answer as one that probed F first, one probe (every
replication of it: a probe that holds runs them all) cheaper whenever a higher rate holds.
Where F misses but a higher visited rate holds (sampling noise at a setting hardly able to meet
the SLOs), the answer is that verified rate instead of none. A search may instead start from a
rate assumed to hold (``assumed_rps``, a larger pool's search from the next smaller pool's
answer), checked last in the same way: if it misses there, the outcome is ``infeasible`` with
that miss as hi, for the caller to search below it.

ok is evaluated only at rates the search visits, in that order, and every answer is a
visited rate at which ok held.

**Monotone in the SLO.** Let ok_T and ok_L be the predicates of a tight and a loose set of
SLOs (SLO_L,km ≥ SLO_T,km for every class k and metric m), everything else equal. For a fixed
λ the simulated sample and so every bound U_km(λ) are the same for both: the sample is a
function of (seed, λ, lengths, policy, admission), and no SLO enters the simulation (the
engine reads weights, quanta, priority jumps and queue-wait limits, never an SLO; the SLO
enters only the comparison U_km ≤ SLO_km). Hence, pointwise,

    ok_T(λ)  ⇒  ok_L(λ)        (U_km(λ) ≤ SLO_T,km ≤ SLO_L,km for all k, m).

Run both searches side by side. The next rate each visits and whether each stops depend
only on (lo, hi) and the step, so as long as every visited rate got the same verdict the two
runs are identical. If they never differ, λ*_L = λ*_T. Otherwise let λ' be the first visited
rate where they differ; by the implication, ok_L(λ') and not ok_T(λ').
* λ' is a bracket or bisection rate: the tight search sets hi = λ', and from then on its
  answer is a lo < hi ≤ λ' (or none); the loose search sets lo = λ' (or returns λ' at the
  growth limit), and lo never decreases, so λ*_L ≥ λ'.
* λ' = F, probed last: both searches reached step 3 with the same verdicts; the tight one is
  infeasible (no capacity) and the loose one returns F > 0.
Either way λ*_L ≥ λ*_T: **a looser SLO never gives less capacity.** The argument needs
nothing about ok being monotone in λ (it is only nearly so, by sampling noise), which is
why it holds exactly and is tested exactly (``tests/test_calibrate_search.py``). Per-class
coefficients are λ* times factors that do not involve the SLO (:mod:`.table`), so they
inherit the property class by class.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

FLOOR_FRACTION = 0.01
GROWTH = 1.5
MAX_GROWTHS = 4

CALIBRATED = "calibrated"
INFEASIBLE = "infeasible"
GROWTH_LIMIT = "growth_limit"


class Verdict(Protocol):
    @property
    def ok(self) -> bool: ...

    @property
    def rate_rps(self) -> float: ...


P = TypeVar("P", bound=Verdict)


@dataclass(frozen=True)
class SearchOutcome(Generic[P]):
    """The answer λ* (0 when infeasible), the probes in the order visited, and the bracket's ends."""

    status: str
    rate_rps: float
    probes: tuple[P, ...]
    lo: P | None
    hi: P | None


def bisect_capacity(ok: Callable[[float], P], ceiling_rps: float, rel_tol: float,
                    start: P | None = None, miss: P | None = None,
                    assumed_rps: float | None = None) -> SearchOutcome[P]:
    """Steps 1 to 4 of the module docstring; ``ceiling_rps`` must be > 0.

    ``start``, a probe already known to hold, replaces the floor: the bracket starts from it
    (and from the ceiling, or one growth above ``start`` when that is higher). ``assumed_rps`` replaces the
    floor's rate as the rate assumed to hold and probed last. ``miss``, a probe already known to miss, at
    ``ceiling_rps``, is the bracket's first hi instead of a new probe there.
    """
    if miss is not None and (miss.ok or miss.rate_rps != ceiling_rps):
        raise ValueError("a known miss must miss, at the ceiling")
    if not ceiling_rps > 0:
        raise ValueError("the search needs a positive ceiling")
    if start is not None and not start.ok:
        raise ValueError("the search can only start from a rate that holds")
    probes: list[P] = []

    def visit(rate: float) -> P:
        result = ok(rate)
        probes.append(result)
        return result

    lo: P | None = start
    if start is not None:
        probes.append(start)
        lo_rps = start.rate_rps
    else:
        lo_rps = FLOOR_FRACTION * ceiling_rps if assumed_rps is None else assumed_rps
    if miss is not None and ceiling_rps > lo_rps:
        probes.append(miss)
        hi = miss
    else:
        hi = visit(ceiling_rps if ceiling_rps > lo_rps else GROWTH * lo_rps)
    growths = 0
    while hi.ok:
        lo, lo_rps = hi, hi.rate_rps
        if growths == MAX_GROWTHS:
            return SearchOutcome(GROWTH_LIMIT, lo_rps, tuple(probes), lo, None)
        growths += 1
        hi = visit(GROWTH * hi.rate_rps)
    while hi.rate_rps - lo_rps > rel_tol * hi.rate_rps:
        mid = visit(0.5 * (lo_rps + hi.rate_rps))
        if mid.ok:
            lo, lo_rps = mid, mid.rate_rps
        else:
            hi = mid
    if lo is None:  # step 3: nothing above the floor (or the assumed rate) held; it decides now
        lo = visit(lo_rps)
        if not lo.ok:
            return SearchOutcome(INFEASIBLE, 0.0, tuple(probes), None, lo)
    return SearchOutcome(CALIBRATED, lo.rate_rps, tuple(probes), lo, hi)
