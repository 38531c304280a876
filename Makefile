# inferops.triton_ecs — one command each for a newcomer: `make deploy-local`, `make test`.
SHELL := /bin/bash
VENV := .venv
BIN := $(CURDIR)/$(VENV)/bin
export PATH := $(BIN):$(PATH)
export ANSIBLE_COLLECTIONS_PATH := $(CURDIR)/.build/collections
export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg

PYTEST := $(BIN)/pytest -p no:cacheprovider

.PHONY: setup services lint sanity unit integration molecule test deploy-local rehearse-dry-run rehearse-rollback-cutover rehearse-models rehearse-example bench

setup:  ## Debian packages (as root), .venv with pinned Python packages, collection link
	scripts/setup.sh

services: setup  ## dockerd, the local registry on 127.0.0.1:5000, and the local inventory's moto server on 127.0.0.1:5100
	scripts/services.sh start

lint: setup
	$(BIN)/yamllint -s .
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/ansible-lint
	scripts/release_check.sh
	@for p in deploy.yml playbooks/*.yml; do $(BIN)/ansible-playbook --syntax-check -i inventories/local $$p >/dev/null || exit 1; done
	@for p in deploy.yml playbooks/*.yml; do $(BIN)/ansible-playbook --syntax-check -i inventories/example $$p >/dev/null || exit 1; done

sanity: setup
	scripts/sanity.sh

unit: setup
	$(PYTEST) tests/unit

# Two workers: the tests mostly wait (servers, bakes, drains). Whole files per worker: a module's fixtures are
# built once and its fixed names and ports (the rehearsal's standby containers) are used by one worker at a time.
integration: services
	$(PYTEST) -n 2 --dist loadfile tests/integration

molecule: services
	scripts/molecule.sh

# deploy-local as a newcomer runs it, once: tests/integration/test_deploy_local.py runs deploy.yml on the same inventory
# twice and asserts the second run changes nothing.
test: lint sanity unit integration molecule deploy-local  ## everything CI runs

# The CPU stand-in for NGC's Triton base image (built locally once), then deploy.yml on the local inventory.
deploy-local: services  ## the main job on the embedded default inventory (a local rehearsal of the AWS flow)
	$(BIN)/python -m tests.harness.images && $(BIN)/ansible-playbook deploy.yml -i inventories/local

# The dry run on the local rehearsal: the whole plan of deploy.yml, nothing written (on a fresh moto server, the plan of
# a new account; after deploy-local, "nothing to change").
rehearse-dry-run: services  ## deploy.yml --check --diff on the local inventory
	$(BIN)/python -m tests.harness.images && $(BIN)/ansible-playbook deploy.yml -i inventories/local --check --diff

# The emergency rollback on the local rehearsal needs a cutover to undo: deploy, deploy a new task-definition revision
# keeping the old colour, then playbooks/rollback_traffic.yml puts production back on the old colour. The next
# deploy-local cuts over again (the new revision stays the latest).
REHEARSAL_RELEASE_2 := '{"task_definition_environment": {"INFEROPS_REHEARSAL_RELEASE": "2"}, "bluegreen_cutover_old_color": "keep"}'
rehearse-rollback-cutover: services  ## deploy, a second release, then the emergency rollback, on the local inventory
	$(BIN)/python -m tests.harness.images
	$(BIN)/ansible-playbook deploy.yml -i inventories/local
	$(BIN)/ansible-playbook deploy.yml -i inventories/local -e $(REHEARSAL_RELEASE_2)
	$(BIN)/ansible-playbook playbooks/rollback_traffic.yml -i inventories/local

# A model release and rollback on the local rehearsal: two simulated container instances (real model agent, real
# tritonserver) join the cluster, sync_models.yml releases version 1 then 2, rollback_models.yml goes back to 1; the
# instances leave again. It holds the lock of the shared moto server on 127.0.0.1:5100 (do not wrap it in another flock).
rehearse-models: services  ## a model release (v1, v2) and a model rollback on the local inventory, through simulated instances
	flock /tmp/inferops-local.lock $(BIN)/python -m tests.harness.rehearse_models

# inventories/example as a new team fills it, deployed end to end on an account made in a private moto server from
# tests/fixtures/example_account.yml (tests/harness/example_rehearsal.py): preflight, infrastructure.yml (check, real),
# a model release, deploy.yml (check, real, again), a model release and rollback, a second deploy and the emergency
# rollback. tests/integration/test_example_deploy.py runs the same in `make test`.
rehearse-example: services  ## inventories/example, placeholders filled, deployed end to end on a moto account shaped as it says
	$(BIN)/python -m tests.harness.example_rehearsal

bench: services
	@for b in bench/*.py; do echo "# $$b"; $(BIN)/python $$b || exit 1; done
