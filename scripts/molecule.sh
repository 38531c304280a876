#!/usr/bin/env bash
# Runs every molecule scenario (create, converge, idempotence, verify, destroy), or the ones named.
set -euo pipefail
cd "$(dirname "$0")/.."
scenarios=("$@")
if [ ${#scenarios[@]} -eq 0 ]; then
  for d in molecule/*/molecule.yml; do [ -e "$d" ] && scenarios+=("$(basename "$(dirname "$d")")"); done
fi
for s in "${scenarios[@]}"; do
  echo "molecule: scenario $s"
  molecule test -s "$s"
done
