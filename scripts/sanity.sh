#!/usr/bin/env bash
# ansible-test sanity on a copy of the collection at ansible_collections/inferops/triton_ecs, outside this
# repository's git tree (inside it, the git-ignored copy would be skipped). ansible-test installs each
# test's pinned requirements, so it runs from a venv of its own and leaves .venv untouched.
set -euo pipefail
cd "$(dirname "$0")/.."

sanity_venv=$PWD/.build/sanity-venv
core_pin=$(grep -E '^ansible-core==' requirements.txt)
# The collection claims the ansible-core that every test runs on (meta/runtime.yml): sanity, unit, integration and
# molecule all run on the pinned core, so the claimed minimum is the pinned core's minor version.
claimed=$(grep -oP '^requires_ansible: "?>=\K[0-9]+\.[0-9]+' meta/runtime.yml)
pinned=$(grep -oP '^ansible-core==\K[0-9]+\.[0-9]+' requirements.txt)
if [ "$claimed" != "$pinned" ]; then
  echo "meta/runtime.yml claims ansible-core >= $claimed but the tests run on $pinned only (requirements.txt):" \
    "claim >=$pinned.0, or run sanity and the tests on $claimed too" >&2
  exit 1
fi
if [ "$(cat "$sanity_venv/.pin" 2>/dev/null)" != "$core_pin" ]; then
  rm -rf "$sanity_venv"
  "${PYTHON:-python3}" -m venv "$sanity_venv"
  "$sanity_venv/bin/pip" install -q "$core_pin" 2>&1 | { grep -v "is ignored: it is neither" || true; }
  echo "$core_pin" > "$sanity_venv/.pin"
fi

# ansible-test bootstraps pip in each test venv from a downloaded get-pip.py; give it an offline one.
pip_pin=$(grep -oP "pip='\K[0-9.]+" "$sanity_venv"/lib/python3*/site-packages/ansible_test/_internal/python_requirements.py)
mkdir -p ~/.ansible/test/cache
cp scripts/ansible_test_get_pip.py ~/.ansible/test/cache/"get_pip_${pip_pin//./_}.py"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
dest=$work/ansible_collections/inferops/triton_ecs
mkdir -p "$dest"
git ls-files -co --exclude-standard -z | rsync -a --from0 --files-from=- ./ "$dest/"
# The collections we depend on, from the `ansible` package in .venv (Galaxy is unreachable).
bundled=$(.venv/bin/python -c 'import ansible_collections, os; print(os.path.dirname(ansible_collections.__path__[0]))')/ansible_collections
ln -s "$bundled/amazon" "$work/ansible_collections/amazon"
ln -s "$bundled/community" "$work/ansible_collections/community"

cd "$dest"
PATH=$sanity_venv/bin:$PATH ansible-test sanity --local --python 3.11 --requirements --color no "$@"
