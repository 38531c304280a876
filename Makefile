# inferops.triton_ecs — one command each for a newcomer: `make deploy-local`, `make test`.
SHELL := /bin/bash
VENV := .venv
BIN := $(CURDIR)/$(VENV)/bin
export PATH := $(BIN):$(PATH)
export ANSIBLE_COLLECTIONS_PATH := $(CURDIR)/.build/collections
export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg

PYTEST := $(BIN)/pytest -p no:cacheprovider

.PHONY: setup services lint sanity unit integration molecule test deploy-local bench

setup:  ## Debian packages (as root), .venv with pinned Python packages, collection link
	scripts/setup.sh

services: setup  ## dockerd and the local registry on 127.0.0.1:5000
	scripts/services.sh start

lint: setup
	$(BIN)/yamllint -s .
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/ansible-lint

sanity: setup
	scripts/sanity.sh

unit: setup
	$(PYTEST) tests/unit

integration: services
	$(PYTEST) tests/integration

molecule: services
	scripts/molecule.sh

test: lint sanity unit integration molecule  ## everything CI runs

deploy-local: services  ## the main job on the embedded default inventory (a local rehearsal of the AWS flow)
	$(BIN)/python -m tests.harness.images  # the CPU stand-in for NGC's Triton base image, built locally once
	$(BIN)/ansible-playbook deploy.yml -i inventories/local

bench: services
	@for b in bench/*.py; do echo "# $$b"; $(BIN)/python $$b || exit 1; done
