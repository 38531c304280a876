#!/usr/bin/env bash
# Idempotent machine setup: Debian packages (as root on Debian), the .venv, and the collection link.
set -euo pipefail
cd "$(dirname "$0")/.."

venv=.venv
python=${PYTHON:-python3}

install_debian_packages() {
  [ "$(id -u)" = 0 ] && [ -f /etc/debian_version ] || return 0
  mapfile -t wanted < <(grep -vE '^\s*(#|$)' requirements-debian.txt)
  missing=()
  for pkg in "${wanted[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "setup: installing Debian packages: ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

install_python_packages() {
  [ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
  stamp="$venv/.requirements.sha256"
  want=$(cat requirements.txt requirements-dev.txt | sha256sum | cut -d' ' -f1)
  if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    echo "setup: installing Python packages into $venv"
    # pip's notes about this machine's unused local indexes are noise; errors still show.
    "$venv/bin/pip" install -q -r requirements-dev.txt 2>&1 | { grep -v "is ignored: it is neither" || true; }
    echo "$want" > "$stamp"
  fi
}

# ansible-playbook finds the collection from a checkout through ansible_collections/<ns>/<name>.
link_collection() {
  mkdir -p .build/collections/ansible_collections/inferops
  ln -sfn "$PWD" .build/collections/ansible_collections/inferops/triton_ecs
}

install_debian_packages
install_python_packages
link_collection
