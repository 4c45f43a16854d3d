# nodewatch — the two commands: `make demo` and `make test`.
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint bench clean-demo cluster-up cluster-down

$(STAMP): pyproject.toml constraints.txt
	@command -v $(PY) >/dev/null 2>&1 || { echo "need $(PY) on PATH (or make PY=python3)"; exit 1; }
	test -d $(VENV) || $(PY) -m venv $(VENV)
	$(BIN)/pip install --disable-pip-version-check -q -c constraints.txt -e '.[dev]'
	$(BIN)/pip install --disable-pip-version-check -q --no-deps -c constraints.txt drain3  # pins cachetools==4.2.1; works with 7.x
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m nodewatch.flows.demo

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q

lint: $(STAMP)
	$(BIN)/ruff check .

bench: $(STAMP)
	for b in benchmarks/*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

# One-host Slurm + PostgreSQL + S3 (moto) on 127.0.0.1 under ${NODEWATCH_LOCAL_DIR:-/tmp/nodewatch-local}
# (docs/operations.md "Scale-out"); then: source "$(infra/local/cluster.sh env)"
cluster-up: $(STAMP)
	infra/local/cluster.sh up

cluster-down:
	infra/local/cluster.sh down
