# Set-up contract (README): `make demo` and `make test` on a fresh machine.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
CORES ?= 2
# torch is installed first, by itself, from whatever index pip uses: on Linux, PyPI's torch==2.13.0 is the CUDA build
# (several GB); where a CPU wheel of it lies in pip's find-links, that one. To keep a torch you installed yourself
# (a CUDA build matching your cluster, or PyTorch's CPU build), run `make TORCH_SPEC= ...`.
TORCH_PIN := torch==2.13.0
TORCH_SPEC ?= $(TORCH_PIN)
# Everything but torch is installed from the lock files: exact versions with the hashes of their files, the ones the
# test suite passes with (`make lock` writes them from pyproject.toml's ranges). `make install LOCK=` takes the
# ranges instead (newest versions allowed, no hashes).
LOCK ?= requirements.lock
DEV_LOCK ?= $(if $(LOCK),requirements-dev.lock)

# Offline data: the data mirror, a folder holding data/ and nltk_data/: ../shared beside the clone when it exists, else
# mirror/, which `make data` builds from the public sources (below). SPURIOUS_DATA_MIRROR takes precedence over the
# hub; with a mirror the run is offline (HF_HUB_OFFLINE=1), so nothing ever touches the network. SPURIOUS_SHARED tells
# the tests where it is.
MIRROR ?= mirror
SHARED ?= $(if $(wildcard ../shared/data),$(abspath ../shared),$(abspath $(MIRROR)))
ifneq ($(wildcard $(SHARED)/data),)
export SPURIOUS_DATA_MIRROR ?= $(SHARED)/data
export SPURIOUS_SHARED ?= $(SHARED)
export HF_HUB_OFFLINE ?= 1
export HF_DATASETS_OFFLINE ?= 1
endif
ifneq ($(wildcard $(SHARED)/nltk_data),)
export NLTK_DATA ?= $(SHARED)/nltk_data
endif
export TOKENIZERS_PARALLELISM ?= false

# results/index.html (rule `index`, part of every workflow run) once more after a Snakemake report was written, so
# that the index links it: only the index job reruns. $(1): the config arguments of the report (last: --forcerun
# and --configfile take every word that follows them).
refresh_index = $(BIN)/snakemake --workflow-profile profiles/local --cores $(CORES) results/index.html --forcerun index $(1)

.PHONY: plan plan-docs install install-dev lock config-docs data demo demo-audit demo-debias check-debias demo-lexical demo-aflite demo-spurious report report-debias report-lexical report-aflite report-spurious test test-slurm lint unit bench gpu-check gpu-rehearse clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# With a lock: its packages exactly (--no-deps: the lock is the whole environment but torch), then the project
# itself, then `pip check` (a missing torch or a lock that no longer fits pyproject.toml fails here).
$(VENV)/.installed: $(BIN)/python pyproject.toml $(LOCK)
	$(if $(TORCH_SPEC),$(BIN)/pip install -q "$(TORCH_SPEC)")
	$(if $(LOCK),$(BIN)/pip install -q --require-hashes --no-deps -r $(LOCK))
	$(BIN)/pip install -q $(if $(LOCK),--no-deps) -e .
	$(BIN)/pip check
	touch $@

$(VENV)/.installed-dev: $(VENV)/.installed $(DEV_LOCK)
	$(if $(DEV_LOCK),$(BIN)/pip install -q --require-hashes --no-deps -r $(DEV_LOCK),$(BIN)/pip install -q -e '.[dev]')
	$(BIN)/pip check
	touch $@

# The lock files, resolved by uv (kept in its own venv, LOCK_TOOL_VENV) from pyproject.toml's ranges and TORCH_PIN for
# Linux x86-64 and Python 3.11, with the hashes of every file of each pinned version (wheels for other platforms
# included). The versions already in a lock are kept where the ranges allow them; `make lock LOCK_UPGRADE=1` takes the
# newest. torch, triton and the nvidia-*/cuda-* packages of PyPI's Linux torch wheel are dropped from the locks
# (TORCH_SPEC installs torch, with the build's own packages); torch's CPU dependencies (sympy, networkx, ...) stay.
LOCK_TOOL_VENV ?= .venv-lock
UV_SPEC ?= uv==0.13.9
LOCK_DROP := ^(torch|triton|nvidia-|cuda-)[A-Za-z0-9._-]*==
define lock_compile
	$(LOCK_TOOL_VENV)/bin/uv pip compile pyproject.toml --quiet --python-version 3.11 \
		--python-platform x86_64-manylinux_2_28 --generate-hashes --annotation-style line \
		--custom-compile-command 'make lock' $(if $(LOCK_UPGRADE),--upgrade) -c <(echo '$(TORCH_PIN)') $(2) -o $(1)
	awk '/^[^ #]/ { drop = /$(LOCK_DROP)/ } !drop' $(1) > $(1).tmp && mv $(1).tmp $(1)
endef

$(LOCK_TOOL_VENV)/bin/uv:
	$(PYTHON) -m venv $(LOCK_TOOL_VENV)
	$(LOCK_TOOL_VENV)/bin/pip install -q "$(UV_SPEC)"

lock: $(LOCK_TOOL_VENV)/bin/uv
	$(call lock_compile,requirements-dev.lock,--extra dev)
	$(call lock_compile,requirements.lock,-c requirements-dev.lock)

install: $(VENV)/.installed

install-dev: $(VENV)/.installed-dev

# docs/config.md from schemas/config.schema.yaml (tests/core/test_config_docs.py fails while it is stale). Runs in the
# venv as it is: it never installs or updates anything.
config-docs:
	@test -x $(BIN)/python || { echo "config-docs: no $(BIN)/python; run make install first" >&2; exit 1; }
	$(BIN)/python -m spurious.workflow.config_docs

# The data mirror from its public sources (`spurious data fetch`, docs/running.md#data) into $(MIRROR)/ (data/ and
# nltk_data/): each file from a public GitHub repository at a pinned commit, checked against its sha256 and stored
# byte for byte as the reference mirror (GNU gzip compresses the .gz files). Later `make` runs use it as they use
# ../shared (run `make data`, then the other targets). DATA_BASE_URL=http://host:port fetches the same paths from
# another host (a local copy; DATA_SOURCE_CHECKSUMS=file for sources it packed anew, see `spurious data fetch -h`).
data: install
	$(BIN)/spurious data fetch --out $(MIRROR) $(if $(DATA_BASE_URL),--base-url $(DATA_BASE_URL)) \
		$(if $(DATA_SOURCE_CHECKSUMS),--source-checksums $(DATA_SOURCE_CHECKSUMS))

# The plans of the four paper configs in docs/paper-configs.md and the profile's requests against them in
# docs/slurm.md, from `spurious plan` and profiles/slurm (tests/core/test_plan_docs.py fails while they are stale).
plan-docs:
	@test -x $(BIN)/python || { echo "plan-docs: no $(BIN)/python; run make install first" >&2; exit 1; }
	$(BIN)/python -m spurious.workflow.plan_docs

# The main workflow on the embedded config.yaml (offline, CPU; budget: 30 min on 2 cores), then the HTML report.
# Budgets are what a target is designed to stay under; measured times: docs/measured-results.md.
demo: install
	$(BIN)/snakemake --workflow-profile profiles/local --cores $(CORES)
	$(MAKE) report

# `spurious audit` as a workflow target on the main demo's QA model (configs/demo-audit.yaml merged with
# config.yaml; the demo's outputs are reused, or built first): results/audit/demo_qa/{audit.json,report.html}.
demo-audit: install
	$(BIN)/snakemake --workflow-profile profiles/local --cores $(CORES) --configfile config.yaml configs/demo-audit.yaml
	@echo "Audit: results/audit/demo_qa/report.html; every table, figure and page: results/index.html"

# Debiasing on CPU (configs/demo-debias.yaml): word-dist, a matched plain control, ReSam/LMix/CReg, NQ out of
# distribution (budget: 60 min on 2 cores); then the quality floors (benchmarks/check_debias_floors.py).
demo-debias: install
	$(BIN)/snakemake --workflow-profile profiles/local --cores $(CORES) --configfile configs/demo-debias.yaml
	$(MAKE) report-debias
	$(MAKE) check-debias

check-debias: install
	$(BIN)/python benchmarks/check_debias_floors.py --json results/check_debias_floors.json

report-debias: install
	$(BIN)/snakemake --workflow-profile profiles/local --cores $(CORES) --configfile configs/demo-debias.yaml \
		--report results/report-debias.html
	$(call refresh_index,--configfile configs/demo-debias.yaml)
	@echo "Report: results/report-debias.html; tables and figures: results/report/ and results/report/debias/"

# Stubborn Lexical Bias on CPU (configs/demo-lexical.yaml): QNLI z-scores, reweighting, bigrams, 8 classifiers and
# their permutation tests, Tables 1-3, App. A.1 and Fig. 2 (budget: 30 min on 2 cores).
demo-lexical: install
	$(BIN)/snakemake --workflow-profile profiles/local --cores $(CORES) --configfile configs/demo-lexical.yaml
	$(MAKE) report-lexical

report-lexical: install
	$(BIN)/snakemake --workflow-profile profiles/local --cores $(CORES) --configfile configs/demo-lexical.yaml \
		--report results/report-lexical.html
	$(call refresh_index,--configfile configs/demo-lexical.yaml)
	@echo "Report: results/report-lexical.html; tables and figures: results/report/lexical/"

# AFLite on CPU (configs/demo-aflite.yaml): the synthetic experiment (Table 7, Fig. 2) and text filtering of SST-2
# and QNLI with MiniLM, D / D_rand / D(AFLite) (Tables 3-4 layout) (budget: 30 min on 2 cores).
demo-aflite: install
	$(BIN)/snakemake --workflow-profile profiles/local --cores $(CORES) --configfile configs/demo-aflite.yaml
	$(MAKE) report-aflite

report-aflite: install
	$(BIN)/snakemake --workflow-profile profiles/local --cores $(CORES) --configfile configs/demo-aflite.yaml \
		--report results/report-aflite.html
	$(call refresh_index,--configfile configs/demo-aflite.yaml)
	@echo "Report: results/report-aflite.html; tables and figures: results/report/aflite/"

# SpuriousBench on CPU (configs/demo-spurious.yaml): the SST-2 suite (24 features), pretrained vs randomly
# initialised MiniLM on five of them, 3 seeds each; spurious gaps per feature and category, Fig. 1, Fig. 2, App. E
# sizes (budget: 30 min on 2 cores).
demo-spurious: install
	$(BIN)/snakemake --workflow-profile profiles/local --cores $(CORES) --configfile configs/demo-spurious.yaml
	$(MAKE) report-spurious

report-spurious: install
	$(BIN)/snakemake --workflow-profile profiles/local --cores $(CORES) --configfile configs/demo-spurious.yaml \
		--report results/report-spurious.html
	$(call refresh_index,--configfile configs/demo-spurious.yaml)
	@echo "Report: results/report-spurious.html; tables and figures: results/report/spurious/"

report: install
	$(BIN)/snakemake --workflow-profile profiles/local --cores $(CORES) --report results/report.html
	$(call refresh_index,)
	@echo "Report: results/report.html; tables and figures: results/report/; every table and figure: results/index.html"

# The paper configs rehearsed for real on the CPU (tests/rehearse/run.py): each configs/paper-<p>.yaml merged with
# its size overlay configs/rehearse/paper-<p>.yaml runs its whole job graph in results/rehearse/<p>/, offline, on
# tiny models of each checkpoint's family and hub-layout dataset fixtures (tests/rehearse/hub_fixtures.py); the papers
# run side by side on the CORES cores, one thread a job. It checks first that the overlay drops no rule, model or
# method of the paper config, then that every final table and figure was written and nothing is left to run. CI runs
# `make rehearse` after the tests.
REHEARSE_PAPERS ?= squad aflite spurious lexical
rehearse: install
	$(BIN)/python tests/rehearse/run.py --cores $(CORES) $(REHEARSE_PAPERS)

rehearse-squad rehearse-aflite rehearse-spurious rehearse-lexical: rehearse-%: install
	$(BIN)/python tests/rehearse/run.py --cores $(CORES) $*

# What a config will cost before it is submitted: jobs, GPU-hours, CPU-hours, memory and disk per rule, each estimate
# with its basis (spurious plan; docs/paper-configs.md). Snakemake plans the jobs; nothing runs. Use:
#   make plan CONFIG=configs/paper-squad.yaml
# The config is checked before anything is installed (the environment can be several GB).
plan:
	@test -n "$(CONFIG)" || { echo "make plan: name the config, e.g. make plan CONFIG=configs/paper-squad.yaml" >&2; exit 2; }
	@$(MAKE) --no-print-directory install
	$(BIN)/spurious plan --configfile $(CONFIG)

lint: install-dev
	$(BIN)/ruff check src tests benchmarks workflow_scripts
	$(BIN)/snakefmt --check Snakefile rules
	$(BIN)/snakemake --lint --cores 1
	$(BIN)/lint-imports

# One pytest-xdist worker per core, each test file whole on one worker (its tiny workflow run is built once); each
# worker keeps to one core (tests/conftest.py). `make unit CORES=0` runs in one process.
unit: install-dev
	$(BIN)/pytest -q -n $(CORES) --dist loadfile --no-loadscope-reorder --durations=25

test: lint unit

# The shipped SLURM profile on a real one-node cluster (Debian's slurm-wlm and munge, installed as root when missing):
# the tiny workflow, a cancelled and resumed training job, the group jobs' requests, a request no node can meet and
# the paper config's plan; daemons stopped by PID; a hard 8-minute limit (tests/slurm/run.sh).
test-slurm: install-dev
	bash tests/slurm/run.sh

bench: install-dev
	$(BIN)/python benchmarks/bench_heuristics.py
	$(BIN)/python benchmarks/bench_bias.py
	$(BIN)/python benchmarks/bench_reweight.py --json results/bench_reweight.json
	$(BIN)/python benchmarks/bench_aflite.py --json results/bench_aflite.json
	$(BIN)/python benchmarks/bench_train_loop.py --steps 40 --warmup 3 --json results/bench_train_loop.json \
		--markdown results/bench_train_loop.md
	$(BIN)/python benchmarks/bench_audit.py --json results/bench_audit.json

# Every GPU code path for real on the demo data (QA training and prediction, eager and with compile: on and attention:
# packed, whose EM must agree within 1 point; compiled and packed losses against eager ones; the three debiasing
# objectives and a bias model, the classifiers, in-context scoring, AFLite and the lexical reweighting on the device,
# the training benchmark's variants), on one CUDA card (budget: 8 minutes): results/gpu_check/gpu_check.{json,md} and
# the benchmark's report bench_train_loop.{json,md,txt}. `make test` runs it with --quick on the CPU
# (tests/core/test_gpu_check.py).
gpu-check: install
	$(BIN)/python benchmarks/gpu_check.py --out results/gpu_check

# The GPU machine's half of benchmarks/device/measure_gpu.sh rehearsed on this CPU before device time is spent on it
# (docs/gpu.md): `prepare` (.device/, its wheels downloaded by pip for this Python), then every call of the plan at tiny
# sizes in a copy of what travels, with the GPU image simulated (snakemake, spaCy, NLTK, gensim and datasets missing;
# jsonschema, MiniLM and the project only where the device half puts them): results/gpu_rehearse/call*/summary.txt.
gpu-rehearse: install-dev
	PYTHON=$(abspath $(BIN)/python) bash benchmarks/device/measure_gpu.sh rehearse

clean:
	rm -rf results/* .snakemake
	touch results/.gitkeep
