# Two commands do all set-up on a fresh machine:
#   make run   - create .venv, install, write the demo's monthly capacity reports (reports/)
#   make test  - create .venv, install, run the whole test suite
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: run test venv clean bench lock reference-venv bench-reference

# constraints.txt pins every installed package to one exact version, so a fresh machine
# installs what the tests and the committed reports were made with; a changed pin reinstalls.
$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -c constraints.txt -e '.[dev]'
	@echo "compiling the simulator ahead of its first use (one time)..."
	$(BIN)/python -c 'from planner.compile_ahead import compile_engine; compile_engine()'
	touch $(STAMP)

venv: $(STAMP)

# Re-pin constraints.txt to the newest versions PyPI has today: install the project into a
# throwaway venv without constraints and freeze what that installed (the project excluded).
# Then `make test` reinstalls .venv from the new pins.
define LOCK_HEADER
# Exact versions of every package that `pip install -e '.[dev]'` installs, so that every machine
# runs the tests and writes the reports with the same libraries (pyproject.toml keeps only lower
# bounds). The Makefile installs with `pip install -c constraints.txt -e '.[dev]'`.
# Regenerate with `make lock`: it installs the project into a throwaway venv without constraints
# (so with the newest versions PyPI has that day) and writes `pip freeze --exclude-editable` here.
endef
export LOCK_HEADER

lock:
	set -e; lock_venv=$$(mktemp -d); trap 'rm -rf "$$lock_venv"' EXIT; \
	$(PYTHON) -m venv "$$lock_venv"; \
	"$$lock_venv/bin/pip" install --quiet --upgrade pip; \
	"$$lock_venv/bin/pip" install --quiet -e '.[dev]'; \
	{ echo "$$LOCK_HEADER"; \
	  echo "# Generated with $$("$$lock_venv/bin/python" --version) on $$(uname -sm)."; \
	  "$$lock_venv/bin/pip" freeze --exclude-editable; } > constraints.txt.tmp; \
	mv constraints.txt.tmp constraints.txt
	@echo "wrote constraints.txt; review it with git diff constraints.txt"

# The main job: the monthly capacity report on the demo scenario and history. October first
# (so that November's report can compare with last month's forecast and plan), then November
# with the policy comparison. Runs are recorded in out/demo/history.duckdb and calibrations cached in
# out/demo/calibration; reports land in reports/. `make clean` removes all of it.
DEMO_HISTORY_DB := out/demo/history.duckdb
DEMO := --scenario scenarios/demo.toml --history data/history/demo_history.parquet --cache-dir out/demo/calibration

run: $(STAMP)
	$(BIN)/planner --history-file $(DEMO_HISTORY_DB) validate scenarios/demo.toml
	$(BIN)/planner --history-file $(DEMO_HISTORY_DB) report --month 2026-10 $(DEMO) --compare-policies none
	$(BIN)/planner --history-file $(DEMO_HISTORY_DB) report --month 2026-11 $(DEMO)
	$(BIN)/planner --history-file $(DEMO_HISTORY_DB) history

test: $(STAMP)
	$(BIN)/ruff check planner tests benchmarks
	$(BIN)/mypy
	$(BIN)/python -m pytest -q -n auto --durations=15

bench: $(STAMP)
	for b in benchmarks/*.py; do $(BIN)/python $$b || exit 1; done

# The reference forecasters (statsforecast) that `benchmarks/forecast_accuracy.py --real` compares the
# planner with live in a venv of their own: statsforecast requires pandas<3 and the product runs pandas 3
# (docs/decisions/0023-statsforecast-stays-out-of-the-product.md). The benchmark runs them as a subprocess.
REF_VENV  := .venv-reference
REF_STAMP := $(REF_VENV)/.installed

$(REF_STAMP): benchmarks/reference/requirements.txt
	$(PYTHON) -m venv $(REF_VENV)
	$(REF_VENV)/bin/pip install --quiet --upgrade pip
	$(REF_VENV)/bin/pip install --quiet -r benchmarks/reference/requirements.txt
	touch $(REF_STAMP)

reference-venv: $(REF_STAMP)

# The planner against statsforecast and both seasonal naives on ServeGen and the demo (several minutes).
bench-reference: $(STAMP) $(REF_STAMP)
	$(BIN)/python benchmarks/forecast_accuracy.py --real

# Everything `make run`, `make test` and `make reference-venv` wrote: the venvs, the demo's run history,
# calibration cache and reports, and the simulator's compiled code (planner/sim/__pycache__/planner-sim-*).
clean:
	rm -rf $(VENV) $(REF_VENV) out reports .pytest_cache .hypothesis .mypy_cache *.egg-info
	find planner tests benchmarks data -name __pycache__ -type d -prune -exec rm -rf {} +
