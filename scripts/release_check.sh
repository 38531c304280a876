#!/usr/bin/env bash
# The collection as the ecosystem's tools see it before they accept it (`make lint` runs this):
#   1. antsibull-docs lint-collection-docs --plugin-docs: every module's and role entry point's documentation, as a
#      docs site renders it (a role entry point without a description is dropped from the site);
#   2. galaxy-importer (what Galaxy and Automation Hub run on an upload) on the tarball `ansible-galaxy collection
#      build` makes: galaxy.yml's metadata, ansible-doc on every module, ansible-lint on the roles and playbooks,
#      Automation Hub's version (>= 1.0.0) and tag rules; configured by tests/galaxy-importer.cfg to run here,
#      without a container engine (ansible-test sanity is `make sanity`).
# Both must report no error and no warning.
set -euo pipefail
cd "$(dirname "$0")/.."
export ANSIBLE_COLLECTIONS_PATH=${ANSIBLE_COLLECTIONS_PATH:-$PWD/.build/collections}

echo "# antsibull-docs lint-collection-docs --plugin-docs"
# antsibull-docs copies the collection and its dependencies (amazon.aws, ...) and copies one that sits in a git work
# tree with `git ls-files`: the `ansible` package's bundled collections in a .venv inside a checkout would copy as
# empty (every amazon.aws doc fragment unknown). Git stops looking for a work tree at their directory.
bundled=$(python -c 'import ansible_collections, os; print(":".join(os.path.realpath(p) for p in ansible_collections.__path__))')
GIT_CEILING_DIRECTORIES=$bundled antsibull-docs lint-collection-docs --plugin-docs .
echo "antsibull-docs: 0 errors"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# What a release would pack: the tracked files and the new ones git does not ignore (no local builds or caches).
git ls-files -co --exclude-standard -z | rsync -a --from0 --files-from=- ./ "$work/src/"
if ! grep -qE '^repository:' "$work/src/galaxy.yml"; then
  # Galaxy requires a repository URL; galaxy.yml names none until the project has a public one (never a made-up URL).
  # The check runs with the publisher's URL when given, else with a reserved, unreachable stand-in; publishing needs
  # the real one in galaxy.yml (README.md, Releasing).
  echo "repository: ${COLLECTION_REPOSITORY_URL:-https://repository.invalid/inferops/triton_ecs}" >> "$work/src/galaxy.yml"
  echo "# galaxy.yml names no repository: galaxy-importer checks with ${COLLECTION_REPOSITORY_URL:-a stand-in URL (set COLLECTION_REPOSITORY_URL)}"
fi
ansible-galaxy collection build --output-path "$work" "$work/src" >/dev/null

echo "# galaxy-importer $(python -c 'import importlib.metadata as m; print(m.version("galaxy-importer"))') (tests/galaxy-importer.cfg)"
status=0
# In $work: the importer writes importer_result.json into the directory it runs in.
(cd "$work" && GALAXY_IMPORTER_CONFIG=$OLDPWD/tests/galaxy-importer.cfg python -m galaxy_importer.main "$work"/*.tar.gz) \
  > "$work/importer.log" 2>&1 || status=$?
findings=$(grep -E '^(ERROR|WARNING)' "$work/importer.log" || true)
if [ "$status" != 0 ] || [ -n "$findings" ]; then
  cat "$work/importer.log" >&2
  echo "galaxy-importer: exit status $status; $(printf '%s' "$findings" | grep -c . || true) error or warning lines (above)" >&2
  exit 1
fi
echo "galaxy-importer: 0 errors, 0 warnings"
