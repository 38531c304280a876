"""How a benchmark (bench/*.py) reports: each figure on stdout as `name: value`, one a line, in the order measured;
exit 1, with nothing on stdout, when it cannot measure (the benchmark says why on stderr)."""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any


def report(figures: Mapping[str, Any] | None) -> int:
    """Prints the figures; the exit code: 1 when there are none (could not measure), else 0."""
    if figures is None:
        return 1
    for name, value in figures.items():
        print(f"{name}: {value}")
    return 0


def measure_in_tempdir(measure: Callable[[Path], Mapping[str, Any] | None], prefix: str) -> int:
    """`measure` in a fresh temporary directory (removed after), then its figures reported."""
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        figures = measure(Path(tmp))
    return report(figures)
