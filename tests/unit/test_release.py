"""Release readiness (issue 28, item 3) that holds between two `make lint` runs: the version and the release notes, the
licence, the ansible-core claim, and a tarball that needs nothing it leaves out.

Stand-in: none - galaxy.yml, meta/runtime.yml, the changelog fragments and the files of the checkout, read as
`ansible-galaxy collection build` reads them; scripts/release_check.sh runs antsibull-docs and galaxy-importer on the
built tarball.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
GALAXY = yaml.safe_load((REPO_ROOT / "galaxy.yml").read_text())
# What the development harness is: it drives tests, molecule, benchmarks and the local rehearsal, and ships together.
HARNESS = {"Makefile", "scripts", "tests", "molecule", "bench", "inventories/local", "requirements-dev.txt"}


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", text)[:3])


def test_release_version_is_stable_and_the_release_notes_say_what_is_stable():
    assert _version(GALAXY["version"]) >= (1, 0, 0)
    summaries = [
        yaml.safe_load(p.read_text()).get("release_summary", "") for p in sorted((REPO_ROOT / "changelogs" / "fragments").glob("*.yml"))
    ]
    (summary,) = [s for s in summaries if s]
    assert "Stable from 1.0.0 on" in summary and "Not part of the interface" in summary


def test_release_licence_is_the_one_galaxy_yml_names():
    assert GALAXY["license"] == ["Apache-2.0"]
    text = (REPO_ROOT / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text


def test_release_urls_are_no_placeholders():
    for key in ("repository", "documentation", "homepage", "issues"):
        value = GALAXY.get(key)
        assert value is None or not re.search(r"example\.(invalid|com|org)|REPLACE|TODO", value), (key, value)


def test_release_claims_the_ansible_core_every_test_runs_on():
    claimed = yaml.safe_load((REPO_ROOT / "meta" / "runtime.yml").read_text())["requires_ansible"]
    pinned = re.search(r"^ansible-core==(\d+\.\d+)", (REPO_ROOT / "requirements.txt").read_text(), re.M).group(1)
    assert claimed == f">={pinned}.0"
    for meta in sorted(REPO_ROOT.glob("roles/*/meta/main.yml")):
        assert yaml.safe_load(meta.read_text())["galaxy_info"]["min_ansible_version"] == pinned, meta


def _shipped() -> list[str]:
    """The files the tarball holds: git's files (tracked and new) less galaxy.yml's build_ignore."""
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    ignored = GALAXY["build_ignore"]

    def excluded(path: str) -> bool:
        return any(path == i or path.startswith(i.rstrip("/") + "/") or Path(path).match(i) for i in ignored)

    return [p for p in listed if not excluded(p)]


def test_release_the_development_harness_stays_out_together():
    shipped = _shipped()
    for part in HARNESS:
        assert not any(p == part or p.startswith(part + "/") for p in shipped), part
    for needed in ("LICENSE", "README.md", "meta/runtime.yml", "playbooks/deploy.yml", "docs/iam.md", "inventories/example/hosts.yml"):
        assert needed in shipped, needed


def test_release_nothing_shipped_reaches_for_an_excluded_file():
    """A shipped playbook, role or plugin that reads a path through playbook_dir, role_path or the repository root
    reads a shipped one (the preflight's docs/iam.md, the model agent's module_utils)."""
    shipped = set(_shipped())
    reach = re.compile(r"\{\{\s*(playbook_dir|role_path|inventory_dir)\s*\}\}/((?:\.\./)*)([\w./-]+)")
    for path in sorted(shipped):
        if not path.endswith((".yml", ".yaml", ".j2", ".py")) or path.startswith(("docs/", "changelogs/")):
            continue
        for base, ups, rest in reach.findall((REPO_ROOT / path).read_text()):
            # Only what climbs out of its own directory into the collection; inventory_dir is the user's inventory,
            # and playbook_dir in a role is the calling playbook's (a build directory, written, not read).
            if not ups or base == "inventory_dir" or (base == "playbook_dir" and not path.startswith("playbooks/")):
                continue
            origin = Path(*Path(path).parts[:2]) if base == "role_path" else Path(path).parent
            resolved = _normalise(f"{origin.as_posix()}/{ups}{rest}")
            if resolved in ("", "."):  # the collection's root (model_agent_program's collection_path): shipped whole
                continue
            assert any(f == resolved or f.startswith(resolved.rstrip("/") + "/") for f in shipped), (path, resolved)


def _normalise(path: str) -> str:
    parts: list[str] = []
    for part in path.split("/"):
        if part == "..":
            parts.pop()
        elif part not in ("", "."):
            parts.append(part)
    return "/".join(parts)


def test_release_the_packer_template_needs_no_excluded_file():
    """The shipped Packer template reads nothing the tarball leaves out (it named the checkout's ansible.cfg): the
    build's collections path is an installed collection's own root, or the checkout's link when no MANIFEST.json
    says it is installed."""
    template = (REPO_ROOT / "packer" / "gpu_ami.pkr.hcl").read_text()
    assert "ANSIBLE_CONFIG" not in template
    assert "ANSIBLE_COLLECTIONS_PATH=${local.collections_path}" in template
    assert re.search(r'collections_path = fileexists\("\$\{path\.root\}/\.\./MANIFEST\.json"\)', template)
    ignored = [i.rstrip("/") for i in GALAXY["build_ignore"]]
    shipped = set(_shipped())
    for ups, rest in re.findall(r"\$\{path\.root\}/((?:\.\./)*)([\w./-]*)", template):
        if len(ups) // 3 > 1:  # above the collection: an installed collection's collections root
            continue
        resolved = _normalise(f"packer/{ups}{rest}")
        if resolved == ".build/collections":  # the checkout's link, the branch taken without MANIFEST.json
            continue
        assert not any(resolved == i or resolved.startswith(i + "/") for i in ignored), resolved
        # MANIFEST.json is the one ansible-galaxy writes into the tarball; packer/manifest.json is Packer's output.
        assert resolved in shipped | {"MANIFEST.json", "packer/manifest.json"}, resolved
