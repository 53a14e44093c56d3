"""Snapshots kept in the run history: each run's forecast and plan, for next month's comparisons.

A report compares last month's forecast with what then happened and this month's plan
with last month's, so both must outlive the files a run wrote (which get overwritten,
moved or cleaned up). Each snapshot kind is one table keyed by ``run_id``, with the
artefact's contract columns (architecture.md) and ``row_index``, the row's position in
the frame that was saved, so a snapshot reads back in its original order.

* ``forecast_snapshots``: region, model, traffic_class, ts (naive UTC TIMESTAMP; read
  back as ``YYYY-MM-DDTHH:MM:SSZ`` text, as the forecast writes it), mean, q50, q90,
  q95, q99 (forecast measure per hour; a missing level is null, other levels are not
  kept), model_used.
* ``plan_snapshots``: period (text, read back as an integer when every period is one),
  region, sku, model, tier, replicas, gpus, usd (the row's cost over its period), hours
  (the period's length; null when the plan has none).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from planner.errors import InputError


@dataclass(frozen=True)
class SnapshotKind:
    table: str
    columns: tuple[tuple[str, str], ...]  # (name, DuckDB type), after run_id and row_index
    required: tuple[str, ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.columns)

    def ddl(self) -> str:
        body = ", ".join(f"{name} {kind}" for name, kind in self.columns)
        return (f"CREATE TABLE IF NOT EXISTS {self.table} (run_id VARCHAR NOT NULL, row_index INTEGER NOT NULL, "
                f"{body})")


SNAPSHOTS = {
    "forecast": SnapshotKind(
        "forecast_snapshots",
        (("region", "VARCHAR"), ("model", "VARCHAR"), ("traffic_class", "VARCHAR"), ("ts", "TIMESTAMP"),
         ("mean", "DOUBLE"), ("q50", "DOUBLE"), ("q90", "DOUBLE"), ("q95", "DOUBLE"), ("q99", "DOUBLE"),
         ("model_used", "VARCHAR")),
        ("region", "model", "traffic_class", "ts", "mean")),
    "plan": SnapshotKind(
        "plan_snapshots",
        (("period", "VARCHAR"), ("region", "VARCHAR"), ("sku", "VARCHAR"), ("model", "VARCHAR"), ("tier", "VARCHAR"),
         ("replicas", "DOUBLE"), ("gpus", "DOUBLE"), ("usd", "DOUBLE"), ("hours", "DOUBLE")),
        ("region", "sku", "model", "tier", "gpus", "usd")),
}


def to_rows(kind: str, run_id: str, frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` as rows of the snapshot table (run_id, row_index, columns in table order)."""
    spec = SNAPSHOTS[kind]
    missing = [c for c in spec.required if c not in frame.columns]
    if missing:
        raise InputError(f"{kind} lacks column(s) {', '.join(missing)}", where=f"{kind} snapshot",
                         fix=f"pass the {kind} table the planner writes")
    rows = pd.DataFrame({"run_id": str(run_id), "row_index": np.arange(len(frame), dtype=np.int32)})
    for name, sql_type in spec.columns:
        values = frame[name] if name in frame.columns else pd.Series([None] * len(frame), index=frame.index)
        if sql_type == "DOUBLE":
            rows[name] = pd.to_numeric(values, errors="coerce").astype(float).to_numpy()
        elif sql_type == "TIMESTAMP":
            stamps = pd.to_datetime(values.astype(str), utc=True, format="ISO8601")
            rows[name] = stamps.dt.tz_localize(None).astype("datetime64[us]").to_numpy()
        else:
            rows[name] = [None if v is None or (isinstance(v, float) and np.isnan(v)) else str(v)
                          for v in values.tolist()]
    return rows


def from_rows(kind: str, rows: pd.DataFrame) -> pd.DataFrame:
    """Rows read back (ordered by row_index) as the artefact's contract frame."""
    spec = SNAPSHOTS[kind]
    frame = rows[list(spec.names)].reset_index(drop=True)
    if kind == "forecast":
        frame["ts"] = pd.to_datetime(frame["ts"]).dt.strftime("%Y-%m-%dT%H:%M:%SZ")
    if kind == "plan" and len(frame) and frame["period"].astype(str).str.fullmatch(r"-?\d+").all():
        frame["period"] = frame["period"].astype(int)
    return frame
