"""The worst sessions of a window in bounded memory: the Space-Saving summary.

Space-Saving (Metwally, Agrawal, El Abbadi, 2005) keeps ``capacity`` counters.
A new item takes the smallest counter and inherits its count as the error, so
every item whose true weight exceeds ``total / capacity`` is in the summary,
and each reported count overestimates the truth by at most its ``error``.
A tenant with thousands of sessions per window thus costs ``capacity`` entries.
"""

from __future__ import annotations

from collections.abc import Iterable


class SpaceSaving:
    """Approximate heaviest items: ``{item: [count, error]}``, at most ``capacity``."""

    __slots__ = ("capacity", "counters")

    def __init__(self, capacity: int, counters: dict[str, list[int]] | None = None) -> None:
        self.capacity = capacity
        self.counters: dict[str, list[int]] = counters if counters is not None else {}

    def add(self, item: str, weight: int = 1) -> None:
        """Count ``weight`` more for ``item``."""
        if weight <= 0:
            return
        slot = self.counters.get(item)
        if slot is not None:
            slot[0] += weight
            return
        if len(self.counters) < self.capacity:
            self.counters[item] = [weight, 0]
            return
        # Replace the smallest counter (k is small: a linear scan is cheapest).
        victim = min(self.counters, key=lambda k: (self.counters[k][0], k))
        floor = self.counters.pop(victim)[0]
        self.counters[item] = [floor + weight, floor]

    def top(self, n: int | None = None) -> list[tuple[str, int, int]]:
        """``(item, count, error)`` by count, heaviest first (ties by item)."""
        ranked = sorted(self.counters.items(), key=lambda kv: (-kv[1][0], kv[0]))
        return [(k, v[0], v[1]) for k, v in ranked[: n if n is not None else len(ranked)]]

    def to_json(self) -> dict[str, list[int]]:
        """The counters, as stored in the window record."""
        return {k: list(v) for k, v in self.counters.items()}

    @classmethod
    def merged(cls, summaries: Iterable[SpaceSaving], capacity: int) -> SpaceSaving:
        """One summary of several (windows or tenants): counts and errors add up."""
        total: dict[str, list[int]] = {}
        for summary in summaries:
            for item, (count, error) in summary.counters.items():
                slot = total.setdefault(item, [0, 0])
                slot[0] += count
                slot[1] += error
        keep = sorted(total.items(), key=lambda kv: (-kv[1][0], kv[0]))[:capacity]
        return cls(capacity, dict(keep))
