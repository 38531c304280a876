#!/usr/bin/env bash
# Starts the services the tests and the local rehearsal use, when they are not running:
# dockerd, a Docker registry on 127.0.0.1:5000, and a moto server (the local AWS API of inventories/local)
# on 127.0.0.1:5100. The tests start their own moto servers and tritonservers on free ports.
set -euo pipefail
cd "$(dirname "$0")/.."

registry_addr=${INFEROPS_REGISTRY_ADDR:-127.0.0.1:5000}
moto_addr=${INFEROPS_MOTO_ADDR:-127.0.0.1:5100}
state=.cache/services
mkdir -p "$state"

wait_for() {  # wait_for <what> <command...>: up to 60 s
  local what=$1; shift
  for _ in $(seq 1 120); do "$@" >/dev/null 2>&1 && return 0; sleep 0.5; done
  echo "services: $what did not come up; see $state/*.log" >&2
  return 1
}

detach() {  # detach <log> <command...>: in the background, holding none of the caller's open files (a flock, a pipe)
  local log=$1; shift
  (
    for fd in /proc/self/fd/*; do fd=${fd##*/}; [ "$fd" -gt 2 ] && eval "exec $fd>&-"; done 2>/dev/null
    exec nohup "$@" >"$log" 2>&1
  ) &
}

start_dockerd() {
  docker info >/dev/null 2>&1 && return 0
  command -v dockerd >/dev/null || { echo "services: dockerd missing; run 'make setup' as root" >&2; exit 1; }
  echo "services: starting dockerd"
  detach "$state/dockerd.log" dockerd
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
  detach "$state/registry.log" docker-registry serve "$state/registry.yml"
  wait_for registry curl -fsS "http://$registry_addr/v2/"
}

start_moto() {  # inventories/local's AWS endpoint; state lives in memory until the process ends
  curl -fsS "http://$moto_addr/moto-api/" >/dev/null 2>&1 && return 0
  [ -x .venv/bin/moto_server ] || { echo "services: .venv/bin/moto_server missing; run 'make setup'" >&2; exit 1; }
  echo "services: starting moto server on $moto_addr"
  detach "$state/moto.log" .venv/bin/moto_server -H "${moto_addr%:*}" -p "${moto_addr##*:}"
  wait_for "moto server" curl -fsS "http://$moto_addr/moto-api/"
}

case "${1:-start}" in
  start) start_dockerd; start_registry; start_moto ;;
  *) echo "usage: $0 start" >&2; exit 2 ;;
esac
