# Two commands do all set-up on a fresh machine:
#   make run   - create .venv, install, write the demo's monthly capacity reports (reports/)
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
	@echo "compiling the simulator ahead of its first use (one time)..."
	$(BIN)/python -c 'from planner.sim.compiled import compile_engine; compile_engine()'
	touch $(STAMP)

venv: $(STAMP)

# The main job: the monthly capacity report on the demo scenario and history. October first
# (so that November's report can compare with last month's forecast and plan), then November
# with the policy comparison. Runs are recorded in out/demo/history.duckdb; reports land in reports/.
DEMO_HISTORY_DB := out/demo/history.duckdb
DEMO := --scenario scenarios/demo.toml --history data/history/demo_history.parquet

run: $(STAMP)
	$(BIN)/planner --history-file $(DEMO_HISTORY_DB) validate scenarios/demo.toml
	$(BIN)/planner --history-file $(DEMO_HISTORY_DB) report --month 2026-10 $(DEMO) --compare-policies none
	$(BIN)/planner --history-file $(DEMO_HISTORY_DB) report --month 2026-11 $(DEMO)
	$(BIN)/planner --history-file $(DEMO_HISTORY_DB) history

test: $(STAMP)
	$(BIN)/python -m pytest -q

bench: $(STAMP)
	for b in benchmarks/*.py; do $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) out reports
