#!/usr/bin/env bash
# Runs every molecule scenario (create, converge, idempotence, verify, destroy), or the ones named.
# MOLECULE_JOBS scenarios run at a time (default 2: they mostly wait on containers and servers, and each has its own
# ephemeral directory, container name and free ports). Each scenario's log is printed whole when it ends; when one
# fails, its task failures are printed again at the end, where a CI log's tail shows them.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${MOLECULE_JOBS:-2}
scenarios=("$@")
if [ ${#scenarios[@]} -eq 0 ]; then
  for d in molecule/*/molecule.yml; do [ -e "$d" ] && scenarios+=("$(basename "$(dirname "$d")")"); done
fi
log_dir=$(mktemp -d)
trap 'rm -rf "$log_dir"' EXIT

run_scenario() {
  local s=$1 started=$SECONDS
  if molecule test -s "$s" >"$log_dir/$s.log" 2>&1; then
    echo ok >"$log_dir/$s.status"
  else
    echo failed >"$log_dir/$s.status"
  fi
  echo "molecule: scenario $s $(cat "$log_dir/$s.status") after $((SECONDS - started)) s" >>"$log_dir/$s.log"
}

running=()
for s in "${scenarios[@]}"; do
  if [ ${#running[@]} -ge "$jobs" ]; then
    wait -n || true
    still=()
    for pid in "${running[@]}"; do kill -0 "$pid" 2>/dev/null && still+=("$pid"); done
    running=("${still[@]}")
  fi
  echo "molecule: scenario $s started"
  run_scenario "$s" &
  running+=($!)
done
wait

failed=()
for s in "${scenarios[@]}"; do
  echo "molecule: ---------------- scenario $s"
  cat "$log_dir/$s.log"
  [ "$(cat "$log_dir/$s.status" 2>/dev/null)" = ok ] || failed+=("$s")
done
for s in "${failed[@]}"; do
  echo "molecule: scenario $s failed; its task failures:"
  grep -a -E -A12 'fatal:|FAILED!|ERROR!|Traceback' "$log_dir/$s.log" | tail -n 80 || true
done
[ ${#failed[@]} -eq 0 ]
