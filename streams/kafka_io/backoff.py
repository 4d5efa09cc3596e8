"""How long to wait before trying again: the one back-off of every client.

The data path, the fleet aggregator, the Alertmanager client, the SDK's output
consumer and the broker's jar download all retry something that failed (a
broker, a peer, a download). They pace their retries with :class:`Backoff`, so
that the policy (exponential, bounded) is written and tested once. It lives at
the bottom of the I/O layers because the SDK may import nothing of the worker.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Backoff:
    """Exponential back-off: ``first`` after the first failure, doubling (``factor``)
    after each next one, never more than ``longest`` (seconds)."""

    first: float
    longest: float
    factor: float = 2.0

    def delay(self, failures: int) -> float:
        """The pause after ``failures`` consecutive failures (1: the first)."""
        if failures < 1:
            return 0.0
        # The exponent is capped so that a long outage cannot overflow the float.
        return min(self.first * self.factor ** min(failures - 1, 64), self.longest)
