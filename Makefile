# Two commands do all set-up on a fresh machine:
#   make run   - create .venv, install, run the main job on the demo scenario
#   make test  - create .venv, install, run the whole test suite
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: run test venv clean bench

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

run: $(STAMP)
	$(BIN)/planner validate scenarios/demo.toml
	$(BIN)/planner ingest data/samples/azure_llm_2023/AzureLLMInferenceTrace_conv.csv --format azure \
	    --region eu-west --model llama3-8b --traffic-class interactive --freq 1min \
	    --out out/demo/azure_conv_demand.csv
	$(BIN)/planner catalog --region eu-west
	$(BIN)/planner forecast data/history/demo_history.parquet --horizon 14d --backtest \
	    --out out/demo/forecast.csv --plots out/demo/forecast_plots
	$(BIN)/planner simulate --scenario scenarios/demo.toml --plan scenarios/fleets/demo_current.csv \
	    --forecast out/demo/forecast.csv --duration 10min --replications 3 --out out/demo/current_fleet_slo.csv

test: $(STAMP)
	$(BIN)/python -m pytest -q

bench: $(STAMP)
	for b in benchmarks/*.py; do $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) out
