#!/usr/bin/env bash
# Starts the services the tests and the local rehearsal use, when they are not running:
# dockerd, and a Docker registry on 127.0.0.1:5000. moto server and tritonserver are started
# per test by the pytest fixtures, and by the local inventory's playbooks.
set -euo pipefail
cd "$(dirname "$0")/.."

registry_addr=${INFEROPS_REGISTRY_ADDR:-127.0.0.1:5000}
state=.cache/services
mkdir -p "$state"

wait_for() {  # wait_for <what> <command...>: up to 60 s
  local what=$1; shift
  for _ in $(seq 1 120); do "$@" >/dev/null 2>&1 && return 0; sleep 0.5; done
  echo "services: $what did not come up; see $state/*.log" >&2
  return 1
}

start_dockerd() {
  docker info >/dev/null 2>&1 && return 0
  command -v dockerd >/dev/null || { echo "services: dockerd missing; run 'make setup' as root" >&2; exit 1; }
  echo "services: starting dockerd"
  nohup dockerd >"$state/dockerd.log" 2>&1 &
  wait_for dockerd docker info
}

start_registry() {
  curl -fsS "http://$registry_addr/v2/" >/dev/null 2>&1 && return 0
  echo "services: starting registry on $registry_addr"
  mkdir -p "$PWD/.cache/registry"
  cat >"$state/registry.yml" <<YAML
version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: $PWD/.cache/registry
  delete:
    enabled: true
http:
  addr: $registry_addr
YAML
  nohup docker-registry serve "$state/registry.yml" >"$state/registry.log" 2>&1 &
  wait_for registry curl -fsS "http://$registry_addr/v2/"
}

case "${1:-start}" in
  start) start_dockerd; start_registry ;;
  *) echo "usage: $0 start" >&2; exit 2 ;;
esac
