"""Measured prefix reuse in a scenario (`reuse = { measured = "<out>.reuse.json" }`): the file is read at load,
a shape is fitted to it (planner/measured_reuse.py), and the fit recovers a known shape from its own log."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import tomli_w
from conftest import samples_dir
from test_workloads import user_data

from planner.errors import InputError
from planner.ingest import ingest_logs, parse_mapping, write_ingest_outputs
from planner.measured_reuse import fit_measured_reuse, scaled_law, shared_prefix_tokens
from planner.scenario import ScenarioError, load_scenario
from planner.scenario.lengths import MeasuredReuse
from planner.sim.class_reuse import ClassReuse, PoolReuse, session_sample
from planner.sim.prefix_workload import ideal_cached_tokens
from planner.sim.workload import EmpiricalLength, LognormalLength, default_workload, sample_requests
from planner.workloads import expected_reuse, resolve_workloads

SLICE = samples_dir() / "mooncake" / "conversation_trace_6001_7000.jsonl"
CAP = 130_048
CHAT = default_workload("interactive", "llama-3.1-70b")


def scenario_with(tmp_path: Path, reuse: dict, **chat) -> Path:
    data = user_data(reuse=reuse, **chat)
    path = tmp_path / "s.toml"
    path.write_bytes(tomli_w.dumps(data).encode())
    return path


def chat_workload(path: Path, histogram: pd.DataFrame | None = None):
    scenario = load_scenario(path)
    return resolve_workloads(scenario, {"llama-3.1-70b": {"chat": 1.0}}, histogram=histogram)[("llama-3.1-70b",
                                                                                               "chat")]


def ingest(tmp_path: Path, inputs: list[str], fmt: str, **options) -> Path:
    result = ingest_logs(inputs, fmt, **options)
    out = tmp_path / "history.parquet"
    write_ingest_outputs(result, out)
    return out


def test_the_mooncake_slices_measured_reuse_is_fitted_with_its_ideal_share(tmp_path: Path):
    labels = {"region": "us-east", "model": "llama-3.1-70b", "traffic_class": "chat"}
    ingest(tmp_path, [str(SLICE)], "mooncake", labels=labels, start=datetime(2026, 11, 1, tzinfo=UTC))
    measured = json.loads((tmp_path / "history.reuse.json").read_text())["series"][0]
    histogram = pd.read_csv(tmp_path / "history.histogram.csv")
    chat = chat_workload(scenario_with(tmp_path, {"measured": "history.reuse.json"}), histogram)
    assert chat.measured is not None and chat.measured.ideal_share == pytest.approx(measured["ideal_share"])
    assert chat.reuse is not None and chat.reuse.turns == 0 and chat.reuse.variants == 1  # 999 of 1,000 hit
    assert 1500 < chat.reuse.system_tokens < 3000
    row = chat.describe()
    assert row["ideal_reuse_share"] == pytest.approx(measured["ideal_share"], abs=0.01)  # 0.1706
    assert row["measured_ideal_reuse_share"] == pytest.approx(0.171, abs=0.001)
    assert "fitted to mooncake hash_ids" in chat.reuse_source and "history.reuse.json" in chat.reuse_source


def test_a_class_file_measured_on_another_model_lends_its_share(tmp_path: Path):
    """The share carries over to a model whose lengths are its own (the 8B's code lengths, ~1.9k prompts)."""
    labels = {"region": "us-east", "model": "llama-3.1-70b", "traffic_class": "code"}
    ingest(tmp_path, [str(SLICE)], "mooncake", labels=labels, start=datetime(2026, 11, 1, tzinfo=UTC))
    data = user_data()
    data["classes"][1]["reuse"] = {"measured": "history.reuse.json"}
    path = tmp_path / "s.toml"
    path.write_bytes(tomli_w.dumps(data).encode())
    code = resolve_workloads(load_scenario(path), {"llama-3.1-8b": {"code": 1.0}})[("llama-3.1-8b", "code")]
    assert code.describe()["ideal_reuse_share"] == pytest.approx(0.1706, abs=0.01)
    assert "of llama-3.1-70b" in code.reuse_source


def session_log(tmp_path: Path, reuse: ClassReuse, first_law, rate: float = 2.0) -> tuple[Path, object]:
    """A generic request log of known conversations (the simulator's session shape) with its session ids."""
    sample = session_sample(rate, 3600.0, type(CHAT)(first_law, CHAT.output, "test"), reuse, 16,
                            np.random.SeedSequence(5))
    frame = pd.DataFrame({
        "ts": pd.Timestamp("2026-11-02", tz="UTC") + pd.to_timedelta(sample.arrival_s, unit="s"),
        "prompt": sample.prompt_tokens, "output": sample.output_tokens, "conv": sample.session,
    })
    path = tmp_path / "chat.csv"
    frame.to_csv(path, index=False)
    return path, sample


def test_sessions_fitted_to_their_own_log_recover_the_shape(tmp_path: Path):
    """Round trip: conversations of 4 turns, 40 s apart, 200 new user tokens a turn, first prompts ~1.2k tokens;
    ingest measures them and the fit recovers turns, think time, user tokens and the first turn's mean."""
    truth = ClassReuse(CAP, turns=4, think_s=40.0, user_tokens=EmpiricalLength.points(np.array([200]),
                                                                                         np.array([1.0]), "t"))
    log, sample = session_log(tmp_path, truth, CHAT.prompt)
    labels = {"region": "us-east", "model": "llama-3.1-70b", "traffic_class": "chat"}
    ingest(tmp_path, [str(log)], "generic", labels=labels,
           mapping=parse_mapping("ts=ts,prompt_tokens=prompt,output_tokens=output,session_id=conv"))
    histogram = pd.read_csv(tmp_path / "history.histogram.csv")
    chat = chat_workload(scenario_with(tmp_path, {"measured": "history.reuse.json"}), histogram)
    fitted = chat.reuse
    assert fitted is not None and fitted.turns == 4 and fitted.system_tokens == 0
    assert fitted.think_s == pytest.approx(40.0, rel=0.1)
    assert fitted.user_tokens is not None
    # the histogram's power-of-two bins blur the prompt law's mean by a few percent, the user tokens with it
    assert fitted.user_tokens.mean() == pytest.approx(200, rel=0.35)
    assert chat.lengths.prompt.mean() == pytest.approx(CHAT.prompt.mean(), rel=0.15)
    row = chat.describe()
    measured_share = chat.measured.ideal_share
    assert row["ideal_reuse_share"] == pytest.approx(measured_share, abs=0.03)
    assert row["prompt_mean_tokens_all_turns"] == pytest.approx(sample.prompt_tokens.mean(), rel=0.1)


def test_the_shared_prefix_fit_recovers_a_known_system_prompt():
    """A sample with one 2,000-token system prompt: measured as ingest would, the fit finds it again."""
    truth = ClassReuse(CAP, system_tokens=2000, variants=1)
    law = PoolReuse((truth,), (CHAT,), (4.0,), (CAP,), 1800.0, 16)
    sample = sample_requests(np.array([4.0]), [CHAT], 1800.0, np.random.SeedSequence(2), prefix=law)
    cached = ideal_cached_tokens(sample)
    measured = MeasuredReuse(model="m", traffic_class="chat", source="test", requests=sample.n,
                             prompt_tokens=int(sample.prompt_tokens.sum()), ideal_cached_tokens=int(cached.sum()),
                             requests_with_hit=int((cached > 0).sum()))
    fitted = fit_measured_reuse(measured, CHAT, CAP)
    assert fitted.reuse is not None and fitted.reuse.system_tokens == pytest.approx(2000, rel=0.05)
    assert expected_reuse(CHAT, fitted.reuse)["ideal_reuse_share"] == pytest.approx(measured.ideal_share, abs=0.01)


def test_a_log_without_reuse_fits_none():
    measured = MeasuredReuse(model="m", traffic_class="chat", source="test", requests=10, prompt_tokens=1000,
                             ideal_cached_tokens=0, requests_with_hit=0)
    fitted = fit_measured_reuse(measured, CHAT, CAP)
    assert fitted.reuse is None and fitted.lengths is CHAT and fitted.note.startswith("no reuse")


def test_the_prefix_length_solves_the_mean_of_the_minimum():
    law = EmpiricalLength.points(np.array([100, 1000]), np.array([1.0, 1.0]), "two")
    # one-token blocks: a prompt of P tokens can be served P - 1 of them
    assert shared_prefix_tokens(law, 99.0, CAP, block_tokens=1) == 99  # E[min(S, P - 1)] = S up to 99
    assert shared_prefix_tokens(law, 300.0, CAP, block_tokens=1) == 501  # (99 + 501) / 2
    assert shared_prefix_tokens(law, 5000.0, CAP, block_tokens=1) == 999  # more than any prompt: all but one token
    # 16-token blocks: the prompts can be served 96 and 992 tokens; S = 96 gives a mean of 96, S = 112 of 104
    assert shared_prefix_tokens(law, 101.0, CAP) == 112
    assert shared_prefix_tokens(law, 99.0, CAP) == 96


def test_a_scaled_law_scales_its_mean():
    lognormal = LognormalLength.through(1000, 8000, CAP)
    assert scaled_law(lognormal, 0.5, CAP).mean() == pytest.approx(0.5 * lognormal.mean(), rel=0.01)
    bins = EmpiricalLength(np.array([64, 128]), np.array([128, 256]), np.array([1.0, 3.0]))
    assert scaled_law(bins, 2.0, CAP).mean() == pytest.approx(2.0 * bins.mean(), rel=0.01)


# --------------------------------------------------------------------------- bad input
def test_a_missing_reuse_file_is_an_input_error_naming_the_field(tmp_path: Path):
    with pytest.raises(InputError, match="reuse file .*nope.json.* not found") as caught:
        load_scenario(scenario_with(tmp_path, {"measured": "nope.json"}))
    assert caught.value.where == "classes[chat].reuse.measured"


def test_a_reuse_file_without_the_class_names_what_it_has(tmp_path: Path):
    (tmp_path / "r.json").write_text(json.dumps({"series": [
        {"model": "llama-3.1-70b", "traffic_class": "other", "source": "x", "requests": 2, "prompt_tokens": 10,
         "ideal_cached_tokens": 5, "requests_with_hit": 1}]}))
    with pytest.raises(InputError, match="no series for class 'chat'; it has llama-3.1-70b / other"):
        load_scenario(scenario_with(tmp_path, {"measured": "r.json"}))
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(InputError, match="cannot read reuse file"):
        load_scenario(scenario_with(tmp_path, {"measured": "bad.json"}))


def test_measured_figures_that_cannot_be_are_scenario_errors(tmp_path: Path):
    (tmp_path / "r.json").write_text(json.dumps({"series": [
        {"model": "llama-3.1-70b", "traffic_class": "chat", "source": "x", "requests": 2, "prompt_tokens": 10,
         "ideal_cached_tokens": 50, "requests_with_hit": 1}]}))
    with pytest.raises(ScenarioError, match="serves more than the log holds"):
        load_scenario(scenario_with(tmp_path, {"measured": "r.json"}))


def test_measured_reuse_and_a_declared_shape_do_not_mix(tmp_path: Path):
    (tmp_path / "r.json").write_text(json.dumps({"series": [
        {"model": "llama-3.1-70b", "traffic_class": "chat", "source": "x", "requests": 2, "prompt_tokens": 10,
         "ideal_cached_tokens": 5, "requests_with_hit": 1}]}))
    with pytest.raises(ScenarioError, match="is measured reuse, and the table also declares a shape"):
        load_scenario(scenario_with(tmp_path, {"measured": "r.json", "turns": 3}))
