# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""The capacity-paced cutover as arithmetic: batch after batch, from the desired counts AWS shows, pure.

D is the count the new colour ends with, k the batch size. The invariant: the two colours together never want more
than D + k tasks. Each batch grows the new colour to min(D, D + k - old) (never below what it already runs), gives it
the production weight round(100 * new / D) - its share of the healthy capacity once the old colour has shrunk, 100 at
the last batch - and then shrinks the old colour to D - new. A rollback is the same walk with the colours swapped.
Every batch is computed from the two desired counts alone, so a re-run resumes from whatever AWS shows: a run killed
after the grow finds the new colour already grown and goes on with the weights; one killed after the shrink starts
the next batch. A state that does not fit the invariant (more than D + k tasks wanted) is never grown: its first
batch only moves weight and shrinks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Batch:
    """One batch: the counts the growing colour and the shrinking colour end it with, and the growing colour's weight."""

    index: int
    total: int
    grow_to: int
    shrink_to: int
    weight: int

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def clamp(batch_size: int, full_count: int) -> int:
    """A batch larger than the full count is one batch of the full count; a batch is at least one task."""
    return max(1, min(batch_size, full_count))


def batch_count(full_count: int, batch_size: int) -> int:
    return -(-full_count // clamp(batch_size, full_count))  # ceil


def weight(count: int, full_count: int) -> int:
    """The production weight (percent) of a colour running `count` of the full count: 100 only when it runs them
    all, at least 1 while it runs any (so it takes its share), at most 99 while the other colour still runs some."""
    if count >= full_count:
        return 100
    if count <= 0:
        return 0
    return min(max(round(100 * count / full_count), 1), 99)


def next_batch(full_count: int, batch_size: int, growing: int, shrinking: int) -> Batch | None:
    """The next batch from the desired counts of the growing and the shrinking colour (None when the growing colour
    runs the full count and the other none). `growing` counts only tasks of the task definition being rolled out."""
    if growing == full_count and shrinking == 0:
        return None
    k = clamp(batch_size, full_count)
    grow_to = min(full_count, max(growing, full_count + k - shrinking))
    total = batch_count(full_count, k)
    index = min(max(-(-grow_to // k), 1), total)
    return Batch(index, total, grow_to, max(full_count - grow_to, 0), weight(grow_to, full_count))


def schedule(full_count: int, batch_size: int, growing: int, shrinking: int) -> list[Batch]:
    """Every batch still to run from these counts (what check mode lists)."""
    batches: list[Batch] = []
    while True:
        batch = next_batch(full_count, batch_size, growing, shrinking)
        if batch is None:
            return batches
        batches.append(batch)
        growing, shrinking = batch.grow_to, batch.shrink_to


def peak(full_count: int, batch_size: int, growing: int, shrinking: int) -> int:
    """The most tasks the two colours want together along the schedule (the invariant: at most D + k, unless the
    start already wants more, which is never grown)."""
    most = growing + shrinking
    for batch in schedule(full_count, batch_size, growing, shrinking):
        most = max(most, batch.grow_to + shrinking)
        shrinking = batch.shrink_to
    return most


def default_batch_size(per_free_instance: list[int], per_new_instance: list[int]) -> int:
    """What one spare instance holds: the free registered instance with the most room, else one new instance of
    the capacity provider's group (its smallest type), else 1 (the capacity check then says why none fits)."""
    free = max(per_free_instance, default=0)
    if free:
        return free
    return max(per_new_instance, default=0) or 1
