"""write_plots: one readable PNG per series, written atomically."""

from __future__ import annotations

from planner.forecast.plots import plot_filename
from planner.forecast.run import forecast_history
from planner.forecast.synthetic import synthetic_history
from planner.workflows.files import write_plots

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_one_png_per_series(tmp_path):
    history = synthetic_history(2, 4 * 168, seed=5)
    history.loc[history.index[500:504], "requests"] = 0.0  # an outage, shaded in the plot
    result = forecast_history(history, horizon_hours=72, quantiles=[0.5, 0.9, 0.95, 0.99], backtest=False)
    paths = write_plots(history, result, tmp_path / "plots")
    keys = result.forecast[["region", "model", "traffic_class"]].drop_duplicates().itertuples(index=False)
    assert [p.name for p in paths] == [plot_filename(*k) for k in keys]
    for path in paths:
        data = path.read_bytes()
        assert data.startswith(PNG_MAGIC) and len(data) > 20_000
    assert sorted(p.name for p in (tmp_path / "plots").iterdir()) == sorted(p.name for p in paths)  # no temp files


def test_fallback_series_plot(tmp_path):
    history = synthetic_history(1, 5 * 24, seed=6)
    result = forecast_history(history, horizon_hours=24, quantiles=[0.5, 0.99], backtest=False)
    (path,) = write_plots(history, result, tmp_path)
    assert path.read_bytes().startswith(PNG_MAGIC)


def test_filenames_are_safe():
    name = plot_filename("aws:us-east-1", "llama-3.1-8b", "inter active/x")
    assert name == "aws_us-east-1__llama-3.1-8b__inter_active_x.png"
