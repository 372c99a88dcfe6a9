# The habits of a contributor (CONTRIBUTING.md). Every target runs in the active virtual environment:
#     python3 -m venv .venv && . .venv/bin/activate && make setup
PYTHON ?= python3
SEEDS ?= 1-20
JOBS ?= 2

.PHONY: setup test coverage fast slow real lint layers budget size-budget bench bench-quick sim crash-trials check

setup:  ## the project, editable, with its test extra (and pre-commit's hooks in .git/hooks)
	$(PYTHON) -m pip install -e '.[test]'
	pre-commit install

test:  ## the whole suite, as CI runs it (the real-cluster tier skips itself without go)
	$(PYTHON) -m pytest -q

COVERAGE_FILE ?= $(or $(TMPDIR),/tmp)/jr2-actors-coverage/data
coverage:  ## the whole suite serially under coverage, with the processes it starts (data outside the checkout)
	rm -rf $(dir $(COVERAGE_FILE)) && mkdir -p $(dir $(COVERAGE_FILE))
	COVERAGE_FILE=$(COVERAGE_FILE) $(PYTHON) -m coverage run -m pytest -q -n0 -p no:cacheprovider
	COVERAGE_FILE=$(COVERAGE_FILE) $(PYTHON) -m coverage combine -q
	COVERAGE_FILE=$(COVERAGE_FILE) $(PYTHON) -m coverage report --skip-covered

fast:  ## the fast suite: no slow end-to-end test, no real cluster
	$(PYTHON) -m pytest -q -m 'not slow and not realcluster'

slow:  ## the slow end-to-end tier alone
	$(PYTHON) -m pytest -q -m 'slow and not realcluster'

real:  ## the real-cluster tier (tests/real/: needs go; its control plane is built once, then cached), serially
	$(PYTHON) -m realcluster build
	$(PYTHON) -m pytest -q -n0 -m realcluster

lint:  ## ruff, mypy (strict), the layering contracts, the size budget
	ruff check .
	mypy
	lint-imports --no-cache --no-logo
	$(PYTHON) -m tests.support.size_budget

layers:  ## the layering contracts alone (.importlinter)
	lint-imports --no-cache --no-logo

budget:  ## is every file within its size allowance (tests/size_budget.toml)?
	$(PYTHON) -m tests.support.size_budget

size-budget:  ## bring the size budget down to the tree (never up), then commit tests/size_budget.toml
	$(PYTHON) -m tests.support.size_budget --update

bench:  ## every benchmark, ratios against baselines measured in the same run (python -m bench --help)
	$(PYTHON) -m bench

bench-quick:  ## every benchmark, short
	$(PYTHON) -m bench --quick

sim:  ## the whole-system simulation: SEEDS=1-500 JOBS=8 make sim
	jr2-actors sim --seeds $(SEEDS) --jobs $(JOBS)

crash-trials:  ## serve SIGKILLed under load and restarted: TRIALS=200 make crash-trials
	jr2-actors sim --crash-trials $(or $(TRIALS),20) --jobs $(JOBS)

check: lint test  ## what CI checks, but the demo (.ci/run does it all, in a fresh environment)
