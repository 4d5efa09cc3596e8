"""What the runtime needs to know, derived from the deployment settings."""

from __future__ import annotations

from dataclasses import dataclass

from spanguard.streams.kafka_io.backoff import Backoff
from spanguard.streams.runtime.owner import RETRY_BACKOFF


def changelog_topic(app_id: str) -> str:
    """The state changelog of the workers of ``app_id`` (compacted, one partition
    per input partition)."""
    return f"{app_id}.changelog"


@dataclass(frozen=True, slots=True)
class RuntimeConfig:
    """Topic names, the guarantee and the checkpoint cadence.

    ``commit_interval`` / ``commit_every``: a partition is checkpointed (changelog,
    fleet partials and input offset in one transaction) when either is reached.
    Under exactly-once the outputs are only visible once their checkpoint commits,
    so the interval is also their added latency; under at-least-once outputs are
    produced at once and the interval only bounds the work redone after a crash.
    """

    input_topic: str
    output_topics: dict[str, str]
    """Output topic name by contract suffix (``faults``, ``decisions`` ...)."""
    changelog_topic: str
    fleet_topic: str | None = None
    exactly_once: bool = False
    batch_size: int = 500
    poll_timeout: float = 0.05
    fetch_wait: float = 0.005
    """Longest the broker holds a fetch of input while it has no new record. aiokafka
    keeps one fetch in flight per broker and leaves out of it the partitions whose
    records were just handed over, so a record that lands on one of those waits for
    the fetch in flight to return: up to this long. Lower means a faster gate under
    load and more fetch requests while idle (200 per second at 5 ms)."""
    max_pending_batches: int = 32
    """Batches of a partition whose outputs may await acknowledgement while the next
    are processed (at-least-once); at the limit the step waits for the oldest."""
    commit_interval: float = 1.0
    commit_every: int = 20_000
    io_timeout: float = 30.0
    """Longest wait for any broker answer before the step is failed and retried."""
    retry_backoff: Backoff = RETRY_BACKOFF
    """The pauses between retries of a failed partition."""
    max_failures: int = 8
    """Consecutive failures at the same input offset after which the partition is
    stopped (loudly, readiness goes false) instead of retried forever."""
    check_partitioning: bool = True
    """Refuse records whose key's murmur2 partition is not the one they arrived on."""
