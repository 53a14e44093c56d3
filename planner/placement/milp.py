"""The placement MILP as arrays: ``min c·x`` under row and column bounds, with named index blocks.

``problem.py`` builds it, ``strengthen.py`` appends valid rows to it and every backend
solves it. It lives apart from both builders so that each can import it without the other.
Names are made from the blocks' indices only when a backend or an LP/MPS dump asks.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from planner.placement.instance import PlacementInstance

_UNSAFE = re.compile(r"[^A-Za-z0-9_.]")
_LABELS = {"o": "origins", "r": "regions", "s": "skus", "m": "models", "k": "classes"}


@dataclass(frozen=True)
class Block:
    """A contiguous range of columns or rows and the instance indices of each entry."""

    name: str
    start: int
    size: int
    index: dict[str, np.ndarray]

    @property
    def stop(self) -> int:
        return self.start + self.size


@dataclass(eq=False)
class Milp:
    """min c·x + offset  s.t.  row_lo ≤ A x ≤ row_hi,  col_lo ≤ x ≤ col_hi,  x_j integer where ``integer``."""

    instance: PlacementInstance
    c: np.ndarray
    cost_usd: np.ndarray  # the rental + switching part of c (no latency penalty, no slack)
    A: sp.csr_matrix
    row_lo: np.ndarray
    row_hi: np.ndarray
    col_lo: np.ndarray
    col_hi: np.ndarray
    integer: np.ndarray
    cols: dict[str, Block]
    rows: dict[str, Block]
    models: tuple[int, ...]
    offset: float = 0.0
    _names: dict[str, list[str]] = field(default_factory=dict)

    @property
    def n_cols(self) -> int:
        return len(self.c)

    @property
    def n_rows(self) -> int:
        return len(self.row_lo)

    @property
    def n_integer(self) -> int:
        return int(self.integer.sum())

    def col_names(self) -> list[str]:
        if "cols" not in self._names:
            self._names["cols"] = _names(self.instance, self.cols.values())
        return self._names["cols"]

    def row_names(self) -> list[str]:
        if "rows" not in self._names:
            self._names["rows"] = _names(self.instance, self.rows.values())
        return self._names["rows"]

    def relaxed(self) -> Milp:
        """The LP relaxation: the same arrays with no integrality."""
        return Milp(self.instance, self.c, self.cost_usd, self.A, self.row_lo, self.row_hi, self.col_lo,
                    self.col_hi, np.zeros_like(self.integer), self.cols, self.rows, self.models, self.offset)


def _names(inst: PlacementInstance, blocks: Iterable[Block]) -> list[str]:
    """Names built from indices, e.g. D_aws_us_east_1_H100_llama_3_1_8b_t12 (LP/MPS-safe characters)."""
    out: list[str] = []
    for block in blocks:
        parts: list[list[str]] = []
        for key, idx in block.index.items():
            if key == "u":
                parts.append(["_".join(inst.unit_name(int(u))) for u in idx])
            elif key == "t":
                parts.append([f"t{int(t)}" for t in idx])
            elif key in _LABELS:
                names = getattr(inst, _LABELS[key])
                parts.append([names[int(i)] for i in idx])
            else:
                parts.append([str(int(i)) for i in idx])
        for i in range(block.size):
            text = "_".join([block.name, *(p[i] for p in parts)])
            out.append(_UNSAFE.sub("_", text))
    return out
