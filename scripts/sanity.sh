#!/usr/bin/env bash
# ansible-test needs the collection at ansible_collections/<namespace>/<name>: run it on a copy.
set -euo pipefail
cd "$(dirname "$0")/.."
dest=.build/sanity/ansible_collections/inferops/triton_ecs
rm -rf "$dest" && mkdir -p "$dest"
git ls-files -co --exclude-standard -z | rsync -a --delete --from0 --files-from=- ./ "$dest/"
cd "$dest"
# Only Python 3.11 is installed here; the controller-only tests need no container.
exec ansible-test sanity --local --python 3.11 --requirements --color no "$@"
