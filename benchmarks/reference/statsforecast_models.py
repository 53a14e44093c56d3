"""Reference forecasts for ``benchmarks/forecast_accuracy.py --real``, run in ``.venv-reference``.

Usage: ``.venv-reference/bin/python benchmarks/reference/statsforecast_models.py REQUEST.json RESULT.json``.

The request (written by the benchmark) is ``{"levels": [80, 90, 98], "tasks": [{"id": str,
"y": [hourly values, no gaps], "horizon": int, "season_lengths": [24, 168] or [24]}]}``.
For every task it fits two statsforecast models on ``y`` alone:

- ``mstl_autoarima``: ``MSTL(season_length=season_lengths, trend_forecaster=AutoARIMA())``;
- ``autoets``: ``AutoETS(season_length=24)``;

and writes ``{"versions": {...}, "results": [{"id": str, "models": {name: {"mean": [...],
"lo<L>", "hi<L>": [...] for every requested level L, "fit_seconds": float}}}]}``, one entry
per task in request order. ``lo<L>``/``hi<L>`` are the ends of the central L % prediction
interval, so the benchmark reads lo98/lo90/lo80/hi80/hi90/hi98 as its q01/q05/q10/q90/q95/q99.
A model that raises gives ``{"error": "..."}`` instead. Forecasts are demand counts, so every
value is clipped at 0 (as the planner's are). ``fit_seconds`` is the wall time of fit plus
predict for that one task; one small fit per model runs first so that no task pays for
compiling statsforecast's kernels.

This file runs under pandas 2 with statsforecast installed; it imports nothing from ``planner``.
"""

from __future__ import annotations

import json
import sys
import time
from importlib.metadata import version
from pathlib import Path

import numpy as np
import pandas as pd
from statsforecast import StatsForecast
from statsforecast.models import MSTL, AutoARIMA, AutoETS


def make_model(name: str, season_lengths: list[int]):
    if name == "mstl_autoarima":
        return MSTL(season_length=season_lengths, trend_forecaster=AutoARIMA(), alias=name)
    return AutoETS(season_length=24, alias=name)


MODELS = ("mstl_autoarima", "autoets")


def forecast_one(name: str, y: np.ndarray, horizon: int, season_lengths: list[int], levels: list[int]) -> dict:
    frame = pd.DataFrame({"unique_id": "s", "ds": pd.date_range("2000-01-03", periods=y.size, freq="h"), "y": y})
    began = time.perf_counter()
    out = StatsForecast(models=[make_model(name, season_lengths)], freq="h", n_jobs=1).forecast(
        df=frame, h=horizon, level=levels)
    seconds = time.perf_counter() - began
    block = {"mean": np.maximum(out[name].to_numpy(float), 0.0).tolist(), "fit_seconds": seconds}
    for level in levels:
        for side in ("lo", "hi"):
            block[f"{side}{level}"] = np.maximum(out[f"{name}-{side}-{level}"].to_numpy(float), 0.0).tolist()
    return block


def warm_up(levels: list[int]) -> None:
    y = 100.0 + 10.0 * np.sin(np.arange(24 * 15) * 2 * np.pi / 24)
    for name in MODELS:
        forecast_one(name, y, 24, [24], levels)


def run(request: dict) -> dict:
    levels = [int(level) for level in request["levels"]]
    warm_up(levels)
    results = []
    for task in request["tasks"]:
        y = np.asarray(task["y"], dtype=float)
        models = {}
        for name in MODELS:
            try:
                models[name] = forecast_one(name, y, int(task["horizon"]), list(task["season_lengths"]), levels)
            except Exception as exc:  # a failed fit is a result to report, not a reason to stop the run
                models[name] = {"error": f"{type(exc).__name__}: {str(exc)[:200]}"}
        results.append({"id": task["id"], "models": models})
    versions = {pkg: version(pkg) for pkg in ("statsforecast", "pandas", "numpy")}
    return {"versions": versions, "results": results}


def main() -> None:
    request_path, result_path = (Path(arg) for arg in sys.argv[1:3])
    result = run(json.loads(request_path.read_text()))
    result_path.write_text(json.dumps(result))


if __name__ == "__main__":
    main()
