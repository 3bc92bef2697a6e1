# Two commands for a fresh clone: `make run` and `make test`. Both set up first.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: setup run test check lint bench bench-service loadtest proofread train clean

setup: $(STAMP)

# Re-installs only when pyproject.toml changed since the last install.
$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	@touch $(STAMP)

# Database, Redis, one Celery worker and uvicorn at http://127.0.0.1:8000; Ctrl-C stops them all.
run: setup
	$(BIN)/python manage.py serve

# The test settings are pinned here: pytest-django prefers an exported DJANGO_SETTINGS_MODULE
# over pyproject.toml, and a developer's shell often exports the development one.
test: setup
	DJANGO_SETTINGS_MODULE=course.settings.test $(BIN)/python manage.py makemigrations --check --dry-run
	$(BIN)/ruff check .
	DJANGO_SETTINGS_MODULE=course.settings.test $(BIN)/python -m pytest

lint: setup
	$(BIN)/ruff check .

bench: setup
	$(BIN)/python -m worker.engine.bench

# Batch-1 TPOT through /v1 (the site as `make run` serves it, one stream at a time) against the
# engine alone, and where the difference goes (a table).
bench-service: setup
	DJANGO_SETTINGS_MODULE=course.settings.dev $(BIN)/python manage.py streambench

# The site under production settings on 127.0.0.1, measured alone and under 20 clients (a table).
loadtest: setup
	DJANGO_SETTINGS_MODULE=course.settings.dev $(BIN)/python manage.py loadtest

# Every problem rendered over the full grid of its inputs, its text checked; prints a table of
# flagged sentences, how many inputs it rendered and how long it took (exit 1 when any is flagged).
# PROOFREAD_ARGS="--seed random" draws a new seed; "--problems 3,4" sweeps a few.
proofread: setup
	DJANGO_SETTINGS_MODULE=course.settings.test $(BIN)/python manage.py proofread $(PROOFREAD_ARGS)

# Retrains the shipped demo models (about 50 minutes on two cores; needs Debian's jargon-text).
# Never run by CI.
train: setup
	$(BIN)/python -m worker.training.train

clean:
	rm -rf $(VENV) var
