#!/usr/bin/env bash
# Runs every molecule scenario (create, converge, idempotence, verify, destroy), or the ones named.
# When a scenario fails, its task failures are printed again at the end, where a CI log's tail shows them.
set -euo pipefail
cd "$(dirname "$0")/.."
scenarios=("$@")
if [ ${#scenarios[@]} -eq 0 ]; then
  for d in molecule/*/molecule.yml; do [ -e "$d" ] && scenarios+=("$(basename "$(dirname "$d")")"); done
fi
log_dir=$(mktemp -d)
trap 'rm -rf "$log_dir"' EXIT
for s in "${scenarios[@]}"; do
  echo "molecule: scenario $s"
  if ! molecule test -s "$s" 2>&1 | tee "$log_dir/$s.log"; then
    echo "molecule: scenario $s failed; its task failures:"
    grep -a -E -A12 'fatal:|FAILED!|ERROR!|Traceback' "$log_dir/$s.log" | tail -n 80 || true
    exit 1
  fi
done
