# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""The preflight's own inputs, made safe before they are used: which values are secrets (never printed, masked in
every output), inventory files that are INI rather than YAML (read, not skipped), the account id (12 digits, never
empty), and the regular expressions it is given (markers, setting patterns) - refused when malformed or shaped to
backtrack without end, and matched with a time bound. Pure functions, but `bounded_search`, which uses a timer signal
when it runs in the main thread (as a module does).
"""

from __future__ import annotations

import re
import signal
import threading
from typing import Any

try:  # Python 3.11+
    from re import _constants as _sre_constants
    from re import _parser as _sre_parse
except ImportError:  # pragma: no cover - older Pythons
    import sre_constants as _sre_constants  # type: ignore[no-redef]
    import sre_parse as _sre_parse  # type: ignore[no-redef]

# Inventory variable names (or keys below them) that say they hold a secret. Unlike a container's variables,
# PRIVATE alone is no secret here (triton_private_subnets); a private key is.
SECRET_NAME = re.compile(r"(?i).*(passw(or)?d|secret|token|credential|private_?key|api_?key|access_?key|(^|_)key(_|$)).*")
# A value shorter than this is not registered for masking: Ansible masks every occurrence of the string in the
# whole result, so a short value would garble the rest. It is still never printed by the preflight's messages.
MIN_MASKED_VALUE = 6
HIDDEN = "(value not shown: the variable's name says secret)"
# The most a pattern may spend on one value before the preflight gives up on it.
MATCH_TIMEOUT_S = 1.0
_ACCOUNT_ID = re.compile(r"[0-9]{12}")


# ---------------------------------------------------------------- secrets


def _path_parts(path: str) -> list[str]:
    return [p for p in re.split(r"[.\[\]]", path) if p and not p.isdigit()]


def is_secret_path(path: str) -> bool:
    """Whether a variable (or a key below it, `a.b[0].c`) is named like a secret: password, token, secret, key, ..."""
    return any(SECRET_NAME.fullmatch(part) for part in _path_parts(path))


def _leaves(value: Any, path: str) -> list[tuple[str, Any]]:
    if isinstance(value, dict):
        return [leaf for key, item in value.items() for leaf in _leaves(item, f"{path}.{key}" if path else str(key))]
    if isinstance(value, list):
        return [leaf for index, item in enumerate(value) for leaf in _leaves(item, f"{path}[{index}]")]
    return [(path, value)]


def secret_values(params: dict[str, Any]) -> set[str]:
    """Every value the preflight is given under a secret-looking name - in `values`, `settings` and `agreements` -
    for the module to register as no_log values (masked in its result, `invocation.module_args` included)."""
    found: list[tuple[str, Any]] = list(_leaves(params.get("values") or {}, ""))
    for setting in params.get("settings") or []:
        if isinstance(setting, dict):
            found += _leaves(setting.get("value"), str(setting.get("name", "")))
    for agreement in params.get("agreements") or []:
        if isinstance(agreement, dict) and isinstance(agreement.get("values"), dict):
            found += _leaves(agreement["values"], "")
    return {
        str(value)
        for path, value in found
        if is_secret_path(path) and value is not None and not isinstance(value, bool) and len(str(value)) >= MIN_MASKED_VALUE
    }


def _redact(value: Any, path: str) -> Any:
    if isinstance(value, dict):
        return {key: _redact(item, f"{path}.{key}" if path else str(key)) for key, item in value.items()}
    if isinstance(value, list):
        return [_redact(item, f"{path}[{index}]") for index, item in enumerate(value)]
    return HIDDEN if is_secret_path(path) and value not in (None, "") else value


def redacted(params: dict[str, Any]) -> dict[str, Any]:
    """`values`, `settings` and `agreements` with every value under a secret-looking name replaced by HIDDEN, for
    the module's invocation: masking misses values too short to mask, this does not."""
    settings = [
        dict(s, value=_redact(s.get("value"), str(s.get("name", "")))) if isinstance(s, dict) else s for s in params.get("settings") or []
    ]
    agreements = [
        dict(a, values=_redact(a["values"], "")) if isinstance(a, dict) and isinstance(a.get("values"), dict) else a
        for a in params.get("agreements") or []
    ]
    return {
        "values": _redact(params.get("values"), "") if params.get("values") is not None else None,
        "settings": settings,
        "agreements": agreements,
    }


def shown(path: str, value: Any) -> str:
    """A value as a message may print it: repr, or HIDDEN under a secret-looking name."""
    return HIDDEN if is_secret_path(path) else repr(value)


# ---------------------------------------------------------------- INI inventories

_INI_SECTION = re.compile(r"^\[([^\]\s]+)\]\s*$")
_INI_PAIR = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=((?:\"[^\"]*\"|'[^']*'|\S)*)")


def _ini_value(raw: str) -> str:
    if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "\"'":
        return raw[1:-1]
    return raw


def parse_ini_inventory(text: str) -> dict[str, Any] | None:
    """The variables of an INI inventory, name -> value (group vars and host vars alike), or None when the text has
    neither a section nor a `name=value`. Values stay strings, as the preflight compares them with markers."""
    variables: dict[str, Any] = {}
    seen = False
    section_is_vars = False
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped[0] in "#;":
            continue
        section = _INI_SECTION.match(stripped)
        if section:
            seen = True
            section_is_vars = section.group(1).endswith(":vars")
            continue
        if section_is_vars:
            name, sep, raw = stripped.partition("=")
            if sep and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name.strip()):
                variables[name.strip()] = _ini_value(raw.strip())
                seen = True
            continue
        # a host line: `host var=value var2="a b"`
        for name, raw in _INI_PAIR.findall(stripped):
            variables[name] = _ini_value(raw)
            seen = True
    return variables if seen else None


# ---------------------------------------------------------------- account id


def account_id_problem(account_id: Any, markers_hit: bool) -> str | None:
    """An empty or malformed account id would skip the account check and pass; a placeholder is reported as one."""
    if markers_hit:
        return None
    if not isinstance(account_id, str) or not _ACCOUNT_ID.fullmatch(account_id.strip()):
        return (
            f"aws_account_id is {account_id!r}: the preflight cannot check the credentials' account without it; set it "
            "to the 12-digit id of the account this inventory deploys to (aws sts get-caller-identity --query Account)"
        )
    return None


# ---------------------------------------------------------------- patterns


class PatternTimeout(Exception):
    """A pattern spent more than MATCH_TIMEOUT_S on one value."""


_REPEATS = {_sre_constants.MAX_REPEAT, _sre_constants.MIN_REPEAT} | (
    {_sre_constants.POSSESSIVE_REPEAT} if hasattr(_sre_constants, "POSSESSIVE_REPEAT") else set()
)
_MAXREPEAT = _sre_constants.MAXREPEAT


def _single_char_set(item: tuple[Any, Any]) -> set[int] | None:
    """The ASCII characters one item matches when it matches exactly one character (LITERAL, IN, ANY), else None."""
    op, av = item
    everything = set(range(128))
    if op == _sre_constants.LITERAL:
        return {av}
    if op == _sre_constants.NOT_LITERAL or op == _sre_constants.ANY:
        return everything - ({av} if op == _sre_constants.NOT_LITERAL else set())
    if op == _sre_constants.IN:
        chars: set[int] = set()
        negate = False
        for sub_op, sub_av in av:
            if sub_op == _sre_constants.NEGATE:
                negate = True
            elif sub_op == _sre_constants.LITERAL:
                chars.add(sub_av)
            elif sub_op == _sre_constants.RANGE:
                chars |= set(range(sub_av[0], min(sub_av[1], 127) + 1))
            else:  # a category (\d, \w, \s): take it as anything, to stay on the safe side
                chars |= everything
        return everything - chars if negate else chars
    return None


def _walk(items: Any) -> list[tuple[Any, Any]]:
    """Every item below `items`, depth first."""
    out = []
    for op, av in items:
        out.append((op, av))
        if op in _REPEATS:
            out += _walk(av[2])
        elif op == _sre_constants.SUBPATTERN:
            out += _walk(av[-1])
        elif op == _sre_constants.BRANCH:
            for branch in av[1]:
                out += _walk(branch)
        elif op in (_sre_constants.ASSERT, _sre_constants.ASSERT_NOT):
            out += _walk(av[1])
        elif op == getattr(_sre_constants, "ATOMIC_GROUP", None):
            out += _walk(av)
    return out


def _body(items: Any) -> list[tuple[Any, Any]]:
    """A repeat's body with its groups unwrapped: [(LITERAL, 45), (MAX_REPEAT, ...)] for `(-[a-z]+)`."""
    items = list(items)
    while len(items) == 1 and items[0][0] == _sre_constants.SUBPATTERN:
        items = list(items[0][1][-1])
    return items


def _ambiguous_repeat(lo: int, hi: int, body: list[tuple[Any, Any]]) -> bool:
    """Whether a repeat that may run more than once can split the same text in many ways (exponential backtracking):
    its body holds an alternation or a repeat of varying length - unless the body starts with one character that no
    varying repeat inside it can match (a separator, as `(-[a-z]+)+`)."""
    if hi != _MAXREPEAT and hi <= 1:
        return False
    inner = _walk(body)
    varying = [av for op, av in inner if op in _REPEATS and av[0] != av[1]]
    if not varying and not any(op == _sre_constants.BRANCH for op, _av in inner):
        return False
    if any(op == _sre_constants.BRANCH for op, _av in inner) or not body:
        return True
    separator = _single_char_set(body[0])
    if separator is None:
        return True
    for _lo, _hi, sub in varying:
        sub = _body(sub)
        chars = _single_char_set(sub[0]) if len(sub) == 1 else None
        if chars is None or chars & separator:
            return True
    return False


def pattern_problem(pattern: Any) -> str | None:
    """Why a pattern cannot be used (not text, not a regular expression, a back-reference, a repeat that backtracks
    without end), or None."""
    if not isinstance(pattern, str):
        return f"is a {type(pattern).__name__}, not a regular expression; quote it"
    try:
        parsed = _sre_parse.parse(pattern)
    except (re.error, OverflowError, RecursionError) as e:
        return f"is not a regular expression ({e}); fix it, e.g. '^subnet-[0-9a-f]{{8,17}}$'"
    for op, av in _walk(parsed):
        if op in (_sre_constants.GROUPREF, _sre_constants.GROUPREF_EXISTS):
            return "uses a back-reference, which can take forever on a long value; match the text without it"
        if op in _REPEATS and _ambiguous_repeat(av[0], av[1], _body(av[2])):
            return (
                "repeats a part that can match the same text in several ways (as (a+)+ or (a|ab)*), which can take "
                "forever on a long value; repeat one character class, or start the repeated part with a separator, "
                "e.g. (-[a-z]+)+"
            )
    return None


def bounded_search(pattern: str, text: str, timeout_s: float = MATCH_TIMEOUT_S) -> re.Match[str] | None:
    """re.search with a time bound: PatternTimeout when it runs longer (Python's regular expression engine checks
    for signals while it backtracks). Outside the main thread, where no timer signal can be set, it is re.search."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        return re.search(pattern, text)

    def expire(_signum: int, _frame: Any) -> None:
        raise PatternTimeout(pattern)

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, timeout_s)
    try:
        return re.search(pattern, text)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


# ---------------------------------------------------------------- the shape of the inputs


def input_problems(params: dict[str, Any]) -> list[str]:
    """Every problem with the preflight's own options (markers, settings, agreements), each naming the field, the
    value and the fix; the checks that would use a bad one are not run."""
    problems = []
    markers = params.get("markers") or {}
    for pattern, meaning in markers.items():
        problem = pattern_problem(pattern)
        if problem:
            problems.append(f"markers: the pattern {pattern!r} {problem}")
        if not isinstance(meaning, str):
            problems.append(f"markers.{pattern}: {meaning!r} is not text; say what the marker stands for, e.g. 'the example account id'")
    for index, setting in enumerate(params.get("settings") or []):
        where = f"settings[{index}]"
        if not isinstance(setting, dict):
            problems.append(f"{where} is {type(setting).__name__}: give {{name, value, fix}} (pattern and applies optional)")
            continue
        for key in ("name", "fix"):
            if not isinstance(setting.get(key), str) or not setting.get(key):
                problems.append(f"{where}.{key} is {setting.get(key)!r}: give the setting's {key} as text")
        if setting.get("pattern") is not None:
            problem = pattern_problem(setting["pattern"])
            if problem:
                problems.append(f"{where}.pattern {setting['pattern']!r} (setting {setting.get('name')}) {problem}")
    for index, agreement in enumerate(params.get("agreements") or []):
        where = f"agreements[{index}]"
        if not isinstance(agreement, dict):
            problems.append(f"{where} is {type(agreement).__name__}: give {{what, values, fix}}")
            continue
        if not isinstance(agreement.get("values"), dict):
            problems.append(f"{where}.values is {agreement.get('values')!r}: give a dict of setting name -> value")
        for key in ("what", "fix"):
            if not isinstance(agreement.get(key), str) or not agreement.get(key):
                problems.append(f"{where}.{key} is {agreement.get(key)!r}: give it as text")
    return problems
