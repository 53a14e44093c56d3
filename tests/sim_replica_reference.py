"""Pure-Python reference of the replica engine (planner/sim/replica), for exact comparison.

Written independently of the compiled code with plain Python objects: lists for the
batches, ``heapq`` on (−key, arrival, id) for the waiting queues (the policy contract's
order), eager removal of rejected requests, and the round-by-round DRR loop
(``drr_select_class_reference``). It follows the documented rules (batching.py,
engine.py, routing.py) step by step, doing the same floating-point operations in the same
order, so on a shared sample both must agree bit for bit. Its prefix cache (prefix.py) is a
dict of users per cached block and an ``OrderedDict`` as the LRU list of the unused ones.
``benchmarks/sim_replica_speed.py`` also times it as the pure-Python step loop.
"""

from __future__ import annotations

import heapq
import math
from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np

from planner.profiles.step_model import ATTENTION_COLUMNS, StepModel
from planner.sim.policies.drr import drr_select_class_reference
from planner.sim.replica.state import I_BLK0, I_NBLK, I_SESS, P_BLOCK, P_CHUNK

PENDING, WAITING, RUNNING, DONE, REJECTED = 0, 1, 2, 3, 4


def _step_model(packed: np.ndarray) -> StepModel:
    """A replica's step model from the engine's packed row (the six attention terms, then the dense table)."""
    n = len(ATTENTION_COLUMNS)
    return StepModel(*(float(v) for v in packed[:n]), tuple(float(v) for v in packed[n:]))


def ref_key(form, weight, mu, size, arrival, jump, isl):
    """A policy's key from its packed KeyForm (jump, index, weight, waited, size, const, over_size,
    over_tokens, over_const, floor_at, floor_to), evaluated at now = 0 as the engine does."""
    c_jump, c_index, c_weight, c_waited, c_size, c_const, d_size, d_tokens, d_const, floor_at, floor_to = form
    num = c_jump * jump + c_index * (weight * mu) + c_weight * weight + c_waited * (0.0 - arrival) + c_size * size
    num += c_const
    if d_size == 0.0 and d_tokens == 0.0 and d_const == 1.0:
        return num
    den = d_size * size + d_tokens * isl + d_const
    return num / (den if den > floor_at else floor_to)


@dataclass
class Rep:
    step: StepModel
    cap: int
    limit: int
    max_batch: int
    budget: int
    n_cls: int
    chunk_cap: int = 0  # most prompt tokens one request prefills in a step; 0: no cap
    running: list = field(default_factory=list)  # [id, kind, tokens]
    heaps: list = field(default_factory=list)
    kv: int = 0
    reserved: int = 0
    n_wait: int = 0
    work: float = 0.0
    end: float = math.inf
    busy: float = 0.0
    kv_area: float = 0.0
    batch_area: float = 0.0
    steps: int = 0
    max_kv: int = 0
    deficits: list = field(default_factory=list)
    ptr: int = -1
    block: int = 0  # prefix-cache block in tokens; 0: no cache
    users: dict = field(default_factory=dict)  # cached block -> running requests using it
    lru: OrderedDict = field(default_factory=OrderedDict)  # unused cached blocks, least recently released first
    cfree: int = 0

    def __post_init__(self):
        self.heaps = [[] for _ in range(self.n_cls)]
        self.deficits = [0.0] * self.n_cls


class Reference:
    """One pool, one sample: ``run()`` then read the per-request lists and replica fields."""

    def __init__(self, st):
        """Build from the compiled engine's fresh :class:`State` (inputs only are read)."""
        self.arr = [float(x) for x in st.arrival]
        self.u = st.route_u.tolist()
        n = len(self.arr)
        self.cls = st.req_i[:, 0].tolist()
        self.prompt = st.req_i[:, 1].tolist()
        self.out = st.req_i[:, 2].tolist()
        self.pred = st.req_f[:, 0].tolist()
        self.rep = [-1] * n
        self.status = [PENDING] * n
        self.prefilled = [0] * n
        self.target = list(self.prompt)
        self.gen = [0] * n
        self.held = [0] * n
        self.res = [0] * n
        self.pre_kv = [0] * n
        self.pre_pol = [0] * n
        self.reason = [0] * n
        self.admit = [math.nan] * n
        self.first = [math.nan] * n
        self.exit = [math.nan] * n
        self.weight, self.jump, self.quantum, self.maxwait = (st.cls_f[:, i].tolist() for i in range(4))
        self.reserve = st.reserve.tolist()
        self.mu = st.mu.tolist()
        drr, preemptive, remaining, self.router, self.d = st.pol_i.tolist()
        self.drr, self.preemptive, self.remaining = bool(drr), bool(preemptive), bool(remaining)
        _, self.trail, self.w0, self.w1 = st.pol_f.tolist()
        self.form = st.pol_key.tolist()
        self.overlap_weight = float(st.pfx_f[0])
        self.blocks = [st.blk_ids[a:a + m].tolist() for a, m in zip(st.req_i[:, I_BLK0], st.req_i[:, I_NBLK],
                                                                     strict=True)]
        self.sess = st.req_i[:, I_SESS].tolist()
        self.sess_rep: dict[int, int] = {}
        self.cref = [0] * n
        self.hit = [0] * n
        self.saved = [0] * n
        self.computed = [0] * n
        k = len(self.weight)
        self.reps = [Rep(_step_model(st.rep_step[r]), *st.rep_i[r, 4:8].tolist(), k, int(st.rep_i[r, P_CHUNK]),
                         block=int(st.rep_i[r, P_BLOCK])) for r in range(st.rep_i.shape[0])]
        self.by_class = [[j for j in range(n) if self.cls[j] == c] for c in range(k)]
        self.ptr = [0] * k
        self.area = 0.0
        self.last = 0.0
        self.nsys = 0
        self.rr = 0
        self.tokens_win = [0] * k

    # ------------------------------------------------------------------ prefix cache
    def leading_run(self, r, j, limit):
        users = self.reps[r].users
        h = free = 0
        for b in self.blocks[j][:max(0, min(limit, len(self.blocks[j])))]:
            if b not in users:
                break
            free += users[b] == 0
            h += 1
        return h, free

    def take(self, r, j, h):
        rep = self.reps[r]
        for b in self.blocks[j][:h]:
            if rep.users[b] == 0:
                del rep.lru[b]
                rep.cfree -= rep.block
                rep.kv += rep.block
            rep.users[b] += 1
        self.cref[j] = h
        self.held[j] = h * rep.block

    def evict(self, r, need):
        rep = self.reps[r]
        while rep.kv + rep.cfree + need > rep.cap and rep.lru:
            b, _ = rep.lru.popitem(last=False)
            del rep.users[b]
            rep.cfree -= rep.block

    def register(self, r, j):
        rep = self.reps[r]
        full = min(self.held[j] // rep.block, len(self.blocks[j]))
        for b in self.blocks[j][self.cref[j]:full]:
            if b not in rep.users:
                rep.users[b] = 1
                continue
            if rep.users[b] == 0:
                del rep.lru[b]
                rep.cfree -= rep.block
            else:
                rep.kv -= rep.block
            rep.users[b] += 1
        self.cref[j] = max(self.cref[j], full)

    def free_kv(self, r, j):
        rep = self.reps[r]
        for b in reversed(self.blocks[j][:self.cref[j]]):
            rep.users[b] -= 1
            if rep.users[b] == 0:
                rep.lru[b] = None
                rep.kv -= rep.block
                rep.cfree += rep.block
        self.held[j] -= self.cref[j] * rep.block
        self.cref[j] = 0
        rep.kv -= self.held[j]
        self.held[j] = 0

    # ------------------------------------------------------------------ request moves
    def outstanding(self, j):
        left = self.pred[j] - self.gen[j]
        return float(self.target[j] - self.prefilled[j]) + (left if left > 0.0 else 0.0)

    def key(self, j, r):
        k = self.cls[j]
        size = self.pred[j] - self.gen[j] if self.remaining else self.pred[j]
        return ref_key(self.form, self.weight[k], self.mu[r][k], size, self.arr[j], self.jump[k],
                       float(self.target[j]))

    def enqueue(self, j, r):
        self.status[j] = WAITING
        self.rep[j] = r
        heapq.heappush(self.reps[r].heaps[self.cls[j]], (-self.key(j, r), self.arr[j], j))
        self.reps[r].n_wait += 1

    def preempt(self, r, slot, by_policy):
        rep = self.reps[r]
        j, kind, tok = rep.running[slot]
        before = self.outstanding(j)
        back = tok if kind else 0
        self.free_kv(r, j)
        rep.reserved -= self.res[j]
        self.res[j] = 0
        self.prefilled[j] = 0
        self.target[j] = self.prompt[j] + self.gen[j]
        rep.work += self.outstanding(j) - before
        del rep.running[slot]
        if by_policy:
            self.pre_pol[j] += 1
        else:
            self.pre_kv[j] += 1
        self.enqueue(j, r)
        return back

    def schedule_running(self, r, budget, want_decode):
        rep = self.reps[r]
        i = 0
        while i < len(rep.running):
            j = rep.running[i][0]
            prefilling = self.prefilled[j] < self.target[j]
            if prefilling == want_decode:
                i += 1
                continue
            need = min(self.target[j] - self.prefilled[j], budget) if prefilling else 1
            if prefilling and 0 < rep.chunk_cap < need:
                need = rep.chunk_cap
            if need <= 0:
                i += 1
                continue
            evicted_self = False
            while rep.kv + rep.cfree + need > rep.cap:
                if rep.cfree > 0:
                    self.evict(r, need)
                    continue
                last = len(rep.running) - 1
                budget += self.preempt(r, last, False)
                if last == i:
                    evicted_self = True
                    break
            if evicted_self:
                break
            self.held[j] += need
            rep.kv += need
            budget -= need
            rep.running[i][1] = 2 if prefilling else 1
            rep.running[i][2] = need
            i += 1
        return budget

    def candidate(self, r):
        rep = self.reps[r]
        heads = [h[0] if h else None for h in rep.heaps]
        if self.drr:
            costs = [max(1.0, float(self.target[h[2]])) if h else 1.0 for h in heads]
            k, rep.ptr = drr_select_class_reference(rep.deficits, self.quantum, costs,
                                                    [h is not None for h in heads], rep.ptr)
            return (heads[k][2], k) if k >= 0 else (-1, -1)
        best = min(((h, k) for k, h in enumerate(heads) if h is not None), default=None)
        return (best[0][2], best[1]) if best else (-1, -1)

    def make_room(self, r, cand, cand_key, need_res):
        rep = self.reps[r]
        mark = [False] * len(rep.running)
        n_left, res_left = len(rep.running), rep.reserved
        cand_entry = (-cand_key, self.arr[cand], cand)
        while n_left >= rep.max_batch or res_left + need_res > rep.limit:
            worst = None
            for i, (v, _, _) in enumerate(rep.running):
                if mark[i] or not float(self.gen[v]) < self.trail * self.pred[v]:
                    continue
                entry = (-self.key(v, r), self.arr[v], v)
                if entry > cand_entry and (worst is None or entry > worst[0]):
                    worst = (entry, i)
            if worst is None:
                return False
            mark[worst[1]] = True
            n_left -= 1
            res_left -= self.res[rep.running[worst[1]][0]]
        for i in range(len(rep.running) - 1, -1, -1):
            if mark[i]:
                self.preempt(r, i, True)
        return True

    def start_step(self, r, now):
        rep = self.reps[r]
        budget = self.schedule_running(r, rep.budget, True)
        budget = self.schedule_running(r, budget, False)
        while budget > 0:
            saved = (list(rep.deficits), rep.ptr)
            cand, k = self.candidate(r)
            if cand < 0:
                break
            hit = hit_free = 0
            if rep.block > 0 and self.blocks[cand]:
                hit, hit_free = self.leading_run(r, cand, (self.target[cand] - 1) // rep.block)
            skip = hit * rep.block
            need_res = self.prompt[cand] + max(self.reserve[k], self.gen[cand] + 1) - skip
            chunk = min(self.target[cand] - skip, budget)
            if 0 < rep.chunk_cap < chunk:
                chunk = rep.chunk_cap
            fits_batch = len(rep.running) < rep.max_batch
            fits_res = rep.reserved + need_res <= rep.limit
            if fits_batch and fits_res and rep.kv + hit_free * rep.block + chunk <= rep.cap:
                heapq.heappop(rep.heaps[k])
                if self.drr and not rep.heaps[k]:
                    rep.deficits[k] = 0.0
                rep.n_wait -= 1
                self.status[cand] = RUNNING
                self.res[cand] = need_res
                rep.reserved += need_res
                if hit > 0:
                    self.take(r, cand, hit)
                    self.prefilled[cand] = skip
                    self.saved[cand] += skip
                    rep.work -= float(skip)
                    if math.isnan(self.admit[cand]):
                        self.hit[cand] = skip
                if rep.cfree > 0:
                    self.evict(r, chunk)
                if math.isnan(self.admit[cand]):
                    self.admit[cand] = now
                rep.running.append([cand, 2, chunk])
                self.held[cand] += chunk
                rep.kv += chunk
                budget -= chunk
                continue
            if self.drr:
                rep.deficits, rep.ptr = saved
            if self.preemptive and not (fits_batch and fits_res):
                if self.make_room(r, cand, -rep.heaps[k][0][0], need_res):
                    budget = rep.budget - sum(t for _, kind, t in rep.running if kind)
                    continue
            break
        decodes = decode_kv = prefill = 0
        pairs = 0.0
        for j, kind, tok in rep.running:
            if kind == 0:
                continue
            if kind == 1:
                decodes += 1
                decode_kv += self.held[j]
            else:
                prefill += tok
                pairs += float(tok) * (float(self.held[j] - tok) + (float(tok) + 1.0) / 2.0)
        if decodes + prefill == 0:
            return -1.0
        rep.max_kv = max(rep.max_kv, rep.kv)
        return rep.step.step_ms(decodes, decode_kv, prefill, pairs) / 1000.0

    def finish_step(self, r, now):
        rep = self.reps[r]
        kept = []
        for j, kind, tok in rep.running:
            if kind:
                before = self.outstanding(j)
                produced = False
                if kind == 1:
                    self.gen[j] += 1
                    produced = True
                else:
                    self.prefilled[j] += tok
                    self.computed[j] += tok
                    if self.prefilled[j] == self.target[j]:
                        self.gen[j] += 1
                        produced = True
                        if math.isnan(self.first[j]):
                            self.first[j] = now
                rep.work += self.outstanding(j) - before
                if produced and self.w0 <= now < self.w1:
                    self.tokens_win[self.cls[j]] += 1
                if rep.block > 0:
                    self.register(r, j)
                if self.gen[j] == self.out[j]:
                    self.status[j] = DONE
                    self.exit[j] = now
                    self.free_kv(r, j)
                    rep.reserved -= self.res[j]
                    self.res[j] = 0
                    rep.work -= self.outstanding(j)
                    self.nsys -= 1
                    continue
            kept.append([j, 0, 0])
        rep.running = kept

    # ------------------------------------------------------------------ events
    def advance(self, now):
        self.area += float(self.nsys) * (now - self.last)
        self.last = now
        for k, ids in enumerate(self.by_class):
            while self.ptr[k] < len(ids):
                j = ids[self.ptr[k]]
                deadline = self.arr[j] + self.maxwait[k]
                if deadline > now or self.status[j] == PENDING:
                    break
                if self.status[j] == WAITING and math.isnan(self.admit[j]):
                    rep = self.reps[self.rep[j]]
                    self.status[j] = REJECTED
                    self.reason[j] = 1
                    self.exit[j] = deadline
                    heap = rep.heaps[k]
                    heap.remove(next(e for e in heap if e[2] == j))
                    heapq.heapify(heap)
                    rep.n_wait -= 1
                    rep.work -= self.outstanding(j)
                    self.nsys -= 1
                    self.area -= now - deadline
                self.ptr[k] += 1

    def route(self, j):
        n = len(self.reps)
        present = [rep.n_wait + len(rep.running) for rep in self.reps]
        if n == 1:
            return 0
        if self.router == 0:
            return min(int(self.u[j][0] * n), n - 1)
        if self.router == 1:
            self.rr += 1
            return (self.rr - 1) % n
        if self.router == 2:
            return min(range(n), key=lambda r: (present[r], r))
        if self.router == 4:
            return min(range(n), key=lambda r: (self.reps[r].work, r))
        if self.router == 5:  # cache-aware
            most = max(rep.n_wait for rep in self.reps)
            score = []
            for r, rep in enumerate(self.reps):
                overlap = 0.0
                if rep.block > 0:
                    h, _ = self.leading_run(r, j, len(self.blocks[j]))
                    overlap = float(h * rep.block) / float(self.prompt[j])
                score.append(self.overlap_weight * overlap - float(rep.kv) / float(rep.cap)
                             - (float(rep.n_wait) / float(most) if most > 0 else 0.0))
            return max(range(n), key=lambda r: (score[r], -r))
        if self.router == 6:  # session affinity: a later turn was placed with its session below
            return min(range(n), key=lambda r: (present[r], r))
        free = list(range(n))
        best = -1
        for i in range(min(self.d, n)):
            r = free.pop(min(int(self.u[j][i] * (n - i)), n - i - 1))
            if best < 0 or present[r] < present[best]:
                best = r
        return best

    def arrive(self, j, now):
        s = self.sess[j]
        if self.router == 6 and s in self.sess_rep:
            r = self.sess_rep[s]
        else:
            r = self.route(j)
            if s >= 0:
                self.sess_rep[s] = r
        rep = self.reps[r]
        if self.prompt[j] + self.reserve[self.cls[j]] > rep.limit:
            self.rep[j], self.status[j], self.reason[j], self.exit[j] = r, REJECTED, 2, now
            return
        self.nsys += 1
        self.enqueue(j, r)
        rep.work += self.outstanding(j)
        if rep.end == math.inf:
            rep.end = now

    def run(self):
        nxt, n = 0, len(self.arr)
        while True:
            r_min, t_min = -1, math.inf
            for r, rep in enumerate(self.reps):
                if rep.end < t_min:
                    r_min, t_min = r, rep.end
            t_arr = self.arr[nxt] if nxt < n else math.inf
            if nxt >= n and r_min < 0:
                break
            if t_arr <= t_min:
                self.advance(t_arr)
                self.arrive(nxt, t_arr)
                nxt += 1
                continue
            now = t_min
            rep = self.reps[r_min]
            self.advance(now)
            self.finish_step(r_min, now)
            dt = self.start_step(r_min, now)
            if dt < 0.0:
                rep.end = math.inf
                continue
            rep.end = now + dt
            lo, hi = max(now, self.w0), min(now + dt, self.w1)
            rep.steps += 1
            if hi > lo:
                rep.busy += hi - lo
                rep.kv_area += float(rep.kv) * (hi - lo)
                rep.batch_area += float(len(rep.running)) * (hi - lo)
        return self

    def arrays(self) -> dict[str, np.ndarray]:
        """The reference's results in the layout of the compiled engine's outputs."""
        return {
            "status": np.array(self.status), "reason": np.array(self.reason), "rep": np.array(self.rep),
            "gen": np.array(self.gen), "pre_kv": np.array(self.pre_kv), "pre_pol": np.array(self.pre_pol),
            "admit": np.array(self.admit), "first": np.array(self.first), "exit": np.array(self.exit),
            "busy": np.array([r.busy for r in self.reps]), "kv_area": np.array([r.kv_area for r in self.reps]),
            "batch_area": np.array([r.batch_area for r in self.reps]),
            "steps": np.array([r.steps for r in self.reps]), "max_kv": np.array([r.max_kv for r in self.reps]),
            "tokens_win": np.array(self.tokens_win), "area": np.array([self.area]),
            "hit": np.array(self.hit), "saved": np.array(self.saved), "computed": np.array(self.computed),
            "cfree": np.array([r.cfree for r in self.reps]),
        }
