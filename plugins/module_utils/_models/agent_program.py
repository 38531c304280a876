# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""The model agent as a program of its own: its import closure, read from the sources, packed into one zipapp.

The agent (`_models/agent.py`, entry point `main()`) shares its sync, release and Triton code with the modules: the
same files under `plugins/module_utils`, imported by the same names. What the instance needs is exactly the files
those imports reach from `agent.py` (`agent_closure`), none of which may import Ansible, which the instance lacks;
`program_files` lays them out under their package names beside a `__main__.py` that calls `main()`, and
`build_program` packs them into a zip that `python3 PROGRAM.pyz --config FILE --boot` runs (what
`python -m zipapp` makes, built byte for byte the same from the same sources, so its digest names it).
Pure but for `ensure_program`, which writes the build where module model_agent_program is told to.
"""

from __future__ import annotations

import ast
import hashlib
import io
import os
import sys
import zipfile
from dataclasses import dataclass

COLLECTION_PACKAGE = "ansible_collections.inferops.triton_ecs"
AGENT_MODULE = f"{COLLECTION_PACKAGE}.plugins.module_utils._models.agent"
PROGRAM_NAME = "inferops-model-agent"
MAIN = f"""# {PROGRAM_NAME}: the model agent, packed with the module_utils it imports (inferops.triton_ecs.model_agent_program)
from {AGENT_MODULE} import main

raise SystemExit(main())
"""
# A fixed timestamp and mode for every entry: the same sources give the same bytes, whenever and wherever built.
_ENTRY_DATE = (1980, 1, 1, 0, 0, 0)
_ENTRY_MODE = 0o644 << 16


class ClosureError(ValueError):
    """An import the agent cannot satisfy on the instance (Ansible, another collection, a missing file)."""


@dataclass(frozen=True)
class Closure:
    files: tuple[str, ...]  # the collection's files the agent imports, relative to the collection root, sorted
    requires: tuple[str, ...]  # top-level names of the modules it imports from outside the collection, sorted

    @property
    def third_party(self) -> tuple[str, ...]:
        """What the instance must install besides python3 (boto3, botocore): `requires` less the standard library."""
        return tuple(name for name in self.requires if name not in sys.stdlib_module_names)


def _source_file(root: str, module: str) -> str | None:
    """The collection file of `module` (a module or a package's __init__), relative to `root`; None when there is none
    (a namespace package or an attribute)."""
    relative = module[len(COLLECTION_PACKAGE) + 1 :].replace(".", "/")
    for candidate in (f"{relative}.py", f"{relative}/__init__.py"):
        if relative and os.path.isfile(os.path.join(root, candidate)):
            return candidate
    return None


def _is_package(root: str, module: str) -> bool:
    return os.path.isdir(os.path.join(root, module[len(COLLECTION_PACKAGE) + 1 :].replace(".", "/")))


def imported_modules(tree: ast.Module, module: str, is_package: bool) -> list[tuple[str, tuple[str, ...]]]:
    """Every import of a module's syntax tree, anywhere in it (a function's lazy import runs too), as (absolute module
    name, names imported from it); relative imports resolved against `module`."""
    found: list[tuple[str, tuple[str, ...]]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((alias.name, ()) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = module.split(".") if is_package else module.split(".")[:-1]
                parts = parts[: len(parts) - (node.level - 1)]
                base = ".".join(parts + ([base] if base else []))
            found.append((base, tuple(alias.name for alias in node.names)))
    return found


def _outside(name: str) -> bool:
    return name != COLLECTION_PACKAGE and not name.startswith(f"{COLLECTION_PACKAGE}.")


def agent_closure(root: str, entry: str = AGENT_MODULE) -> Closure:
    """The files of the collection at `root` that `entry` imports, directly or through each other, with the package
    __init__ files Python runs on the way; and the names it imports from outside. ClosureError on an import of
    Ansible or of another collection (absent on the instance) or of a collection module with no file."""
    files: set[str] = set()
    requires: set[str] = set()
    pending = [entry]
    seen: set[str] = set()
    while pending:
        module = pending.pop()
        if module in seen:
            continue
        seen.add(module)
        # Importing a.b.c runs the __init__ of a and of a.b first.
        parents = module.split(".")
        pending.extend(".".join(parents[:depth]) for depth in range(len(COLLECTION_PACKAGE.split(".")) + 1, len(parents)))
        path = _source_file(root, module)
        if path is None:
            if _is_package(root, module):
                continue  # a directory without __init__.py: nothing runs
            raise ClosureError(f"{module}: no file {module[len(COLLECTION_PACKAGE) + 1 :].replace('.', '/')}.py under {root}")
        files.add(path)
        with open(os.path.join(root, path), encoding="utf-8") as source:
            try:
                tree = ast.parse(source.read(), filename=path)
            except SyntaxError as err:
                raise ClosureError(f"{path} line {err.lineno}: {err.msg}; the agent cannot be built from it") from err
        for name, names in imported_modules(tree, module, path.endswith("__init__.py")):
            if name.split(".")[0] in ("ansible", "ansible_collections") and _outside(name):
                raise ClosureError(
                    f"{path} imports {name}: the model agent runs on the instance's python3 without Ansible or other "
                    "collections; move what it needs into a module_utils file that imports neither"
                )
            if _outside(name):
                requires.add(name.split(".")[0])
                continue
            pending.append(name)
            # `from package import name`: name is a submodule when it has a file of its own, else an attribute.
            pending.extend(f"{name}.{attr}" for attr in names if attr != "*" and _source_file(root, f"{name}.{attr}"))
    return Closure(files=tuple(sorted(files)), requires=tuple(sorted(requires)))


def program_files(root: str, closure: Closure) -> dict[str, bytes]:
    """The program's entries: each closure file under its package path (ansible_collections/inferops/triton_ecs/...),
    an empty __init__.py in every directory without one (the levels the collection loader provides on a controller),
    and __main__.py."""
    prefix = COLLECTION_PACKAGE.replace(".", "/")
    entries: dict[str, bytes] = {}
    for path in closure.files:
        with open(os.path.join(root, path), "rb") as source:
            entries[f"{prefix}/{path}"] = source.read()
    for name in list(entries):
        parts = name.split("/")[:-1]
        for depth in range(1, len(parts) + 1):
            entries.setdefault("/".join(parts[:depth]) + "/__init__.py", b"")
    entries["__main__.py"] = MAIN.encode()
    return entries


def build_program(entries: dict[str, bytes]) -> bytes:
    """A zipapp of `entries`, the same bytes for the same entries: sorted, with fixed timestamps and modes."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name in sorted(entries):
            info = zipfile.ZipInfo(name, date_time=_ENTRY_DATE)
            info.external_attr = _ENTRY_MODE
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, entries[name])
    return buffer.getvalue()


def program_file_name(program: bytes) -> str:
    """Content-addressed: a build of other sources never takes the name of this one."""
    return f"{PROGRAM_NAME}-{hashlib.sha256(program).hexdigest()[:16]}.pyz"


def ensure_program(root: str, dest_dir: str, check_mode: bool) -> dict[str, object]:
    """The agent built from the collection at `root` into `dest_dir` under its content-addressed name: written only
    when no file of that name holds these bytes (a second run changes nothing), never in check mode."""
    closure = agent_closure(root)
    program = build_program(program_files(root, closure))
    path = os.path.join(dest_dir, program_file_name(program))
    try:
        with open(path, "rb") as existing:
            present = existing.read() == program
    except FileNotFoundError:
        present = False
    if not present and not check_mode:
        os.makedirs(dest_dir, exist_ok=True)
        partial = f"{path}.{os.getpid()}.partial"
        with open(partial, "wb") as out:
            out.write(program)
        os.chmod(partial, 0o644)
        os.replace(partial, path)  # atomic: a concurrent build of the same sources writes the same bytes
    return {
        "changed": not present,
        "path": path,
        "sha256": hashlib.sha256(program).hexdigest(),
        "files": list(closure.files),
        "third_party": list(closure.third_party),
        "diff": {"before": {"path": path if present else None}, "after": {"path": path}},
    }
