# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""Which release served a colour, and which colour served the production route, at a time T: a replay of the
ledger's entries. Pure functions, no I/O: the entries come in as (key, entry) pairs.

The rules, applied in the order the entries ended (an entry takes effect at its `ended` time):

- a `failed` entry moves nothing;
- an entry with a `production_color` (and not failed) puts the production route on that colour;
- a `succeeded` entry puts its release on its `color`, or on both colours when `color` is null (a model release
  or rollback the agents apply fleet-wide); each of release_id, image, task_definition and models that the entry
  gives replaces the colour's, and one left null keeps the colour's earlier value (a model release does not
  change the image);
- a `rolled_back` entry's release did not stay: it moves only the production route (to the colour traffic went
  back to), never a colour's release;
- `ami_id` is the fleet's, from the last entry that gave one.

`resolve` reads the entries newest first and stops as soon as every answer is known, so a query reads only the
end of a long ledger; `replay` reads them in order and gives the same answers (the unit tests hold the two equal).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from ansible_collections.inferops.triton_ecs.plugins.module_utils._ledger.entry import COLORS, parse_time

RELEASE_FIELDS = ("release_id", "image", "task_definition", "models")


def _empty_color(color: str) -> dict[str, Any]:
    return {"color": color, **dict.fromkeys(RELEASE_FIELDS), "entry_key": None, "since": None, "kind": None}


def targets(entry: dict[str, Any]) -> tuple[str, ...]:
    """The colours whose release a succeeded entry sets: its colour, or both (a fleet-wide model release)."""
    return (entry["color"],) if entry.get("color") else COLORS


def in_effect(entry: dict[str, Any], at: datetime) -> bool:
    return parse_time(entry["ended"], "ended") <= at


class _State:
    """What is known so far about production and each colour, filled newest entry first (the first value found
    for a field is the newest)."""

    def __init__(self) -> None:
        self.colors = {color: _empty_color(color) for color in COLORS}
        self.known: dict[str, set[str]] = {color: set() for color in COLORS}
        self.production: dict[str, Any] = {"production_color": None, "entry_key": None, "since": None}
        self.ami: dict[str, Any] = {"ami_id": None, "entry_key": None}
        self.read = 0

    def take(self, key: str, entry: dict[str, Any]) -> None:
        self.read += 1
        if entry["outcome"] == "failed":
            return
        if entry.get("production_color") and self.production["production_color"] is None:
            self.production = {"production_color": entry["production_color"], "entry_key": key, "since": entry["ended"]}
        if entry["outcome"] != "succeeded":
            return
        for color in targets(entry):
            state, known = self.colors[color], self.known[color]
            if state["entry_key"] is None and any(entry.get(field) is not None for field in RELEASE_FIELDS):
                state.update(entry_key=key, since=entry["ended"], kind=entry["kind"])
            for field in RELEASE_FIELDS:
                if field not in known and entry.get(field) is not None:
                    state[field] = entry[field]
                    known.add(field)
        if entry.get("ami_id") and self.ami["ami_id"] is None:
            self.ami = {"ami_id": entry["ami_id"], "entry_key": key}

    def complete(self) -> bool:
        return (
            self.production["production_color"] is not None
            and self.ami["ami_id"] is not None
            and all(self.known[color] == set(RELEASE_FIELDS) for color in COLORS)
        )


def resolve(newest_first: Iterable[tuple[str, dict[str, Any]]], at: datetime) -> dict[str, Any]:
    """The answer at `at` from entries given newest first (entries that ended after `at` are skipped); stops reading
    once every answer is known."""
    state = _State()
    for key, entry in newest_first:
        if not in_effect(entry, at):
            continue
        state.take(key, entry)
        if state.complete():
            break
    return _answer(state)


def replay(oldest_first: list[tuple[str, dict[str, Any]]], at: datetime) -> dict[str, Any]:
    """The same answer from entries in time order (the whole ledger up to `at`)."""
    return resolve(reversed(oldest_first), at)


def _answer(state: _State) -> dict[str, Any]:
    return {
        "production_color": state.production["production_color"],
        "production_entry_key": state.production["entry_key"],
        "production_since": state.production["since"],
        "colors": state.colors,
        "ami_id": state.ami["ami_id"],
        "entries_read": state.read,
    }


def answer_for(resolved: dict[str, Any], color: str | None) -> dict[str, Any]:
    """The answer about one colour (the asked one, else the production route's): its release and where it comes from."""
    production = resolved["production_color"]
    asked = color or production
    served = resolved["colors"].get(asked) if asked else None
    release = {field: (served or {}).get(field) for field in RELEASE_FIELDS}
    return {
        "color": asked,
        "production_color": production,
        "serves_production": asked is not None and asked == production,
        **release,
        "ami_id": resolved["ami_id"],
        "entry_key": (served or {}).get("entry_key"),
        "since": (served or {}).get("since"),
        "production_entry_key": resolved["production_entry_key"],
        "production_since": resolved["production_since"],
    }


def window(oldest_first: Iterable[tuple[str, dict[str, Any]]], since: datetime, until: datetime) -> list[dict[str, Any]]:
    """Entries that ended in [since, until], in time order, each with its key."""
    return [{"key": key, **entry} for key, entry in oldest_first if since <= parse_time(entry["ended"], "ended") <= until]


def describe(at: str, answer: dict[str, Any], entries: list[dict[str, Any]] | None = None) -> list[str]:
    """The answer, and the window's entries, as lines for a reader (what playbooks/release_history.yml prints)."""
    missing = "(not recorded)"
    production = answer["production_color"]
    lines = [
        f"production route at {at}: "
        + (f"{production} (since {answer['production_since']})" if production else "unknown: no ledger entry before then moved it")
    ]
    if answer["color"]:
        since = f" (since {answer['since']})" if answer["since"] else ""
        models = answer["models"]
        lines += [
            f"{answer['color']}: release {answer['release_id'] or missing}{since}",
            f"  image: {answer['image'] or missing}",
            f"  task definition: {answer['task_definition'] or missing}",
            "  models: " + ((", ".join(f"{m['name']} v{m['version']}" for m in models) or "none") if models is not None else missing),
            f"  AMI: {answer['ami_id'] or missing}",
            f"  from entry: {answer['entry_key'] or '(none)'}",
        ]
    for e in entries or []:
        where = e["color"] or "fleet"
        lines.append(f"{e['ended']}  {e['kind']} {e['outcome']} on {where}: release {e['release_id'] or '-'} by {e['caller']}")
    return lines
