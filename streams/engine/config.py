"""The engine's configuration: one typed, immutable settings object."""

from __future__ import annotations

from datetime import timedelta
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr

from spanguard.schemas import DEFAULT_SEVERITY, FaultKind, Severity

DEV_SECRET = "spanguard-development-secret-change-me"
"""The hashing secret used when none is configured; fine for tests and demos only."""


class EngineSettings(BaseModel):
    """Every knob of the integrity rules (the contract's "configuration").

    The Faust worker builds it from ``SPANGUARD_*`` settings; tests and
    ``spanguard replay`` build it directly.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    drift_tolerance: float = Field(0.05, ge=0, description="relative rise of mean relevance")
    severities: dict[FaultKind, Severity] = Field(
        default_factory=dict, description="overrides of the contract's default severities"
    )
    protect_lineage: bool = Field(
        False, description="refuse (LINEAGE) candidates that a live span cites in derived_from"
    )
    poisoned: Literal["drop", "flag"] = Field(
        "drop", description="drop poisoned spans at the next decision, or only flag them"
    )
    rewrite_of_rewrite_at: int = Field(
        2, ge=1, description="counter that raises REWRITE_OF_REWRITE"
    )
    poisoned_at: int = Field(3, ge=1, description="counter that poisons a span")
    stall_after: int = Field(3, ge=1, description="FREEZEs in a row that raise PRUNING_STALLED")
    balloon_ratio: float = Field(
        1.0,
        ge=0,
        description="SUMMARY_BALLOONING when a rewritten span's tokens exceed this x its sources'",
    )
    min_summary_tokens: int = Field(
        3, ge=0, description="EMPTY_SUMMARY below this many tokens (with enough parent tokens)"
    )
    empty_summary_parent_factor: int = Field(
        25,
        ge=1,
        description="EMPTY_SUMMARY needs parents holding at least this x min_summary_tokens",
    )
    idle_timeout: timedelta = Field(
        timedelta(hours=24),
        ge=timedelta(0),
        description="a session with no event for this long (event time) expires; 0: never",
    )
    cold_after: timedelta = Field(
        timedelta(minutes=10),
        ge=timedelta(0),
        description=(
            "a live session with no event for this long (event time) is held packed, "
            "~4 KB instead of ~15, until it is read again; 0: never"
        ),
    )
    tombstone_retention: timedelta = Field(
        timedelta(days=7),
        ge=timedelta(0),
        description="markers of closed and expired sessions are kept this long; 0: forever",
    )
    max_clock_skew: timedelta = Field(
        timedelta(hours=1),
        ge=timedelta(0),
        description="on Kafka the clock never runs past a record's broker timestamp + this",
    )
    drift_series_points: int = Field(
        16,
        ge=2,
        description="MONOTONIC_DRIFT evidence holds the streak's last this many points",
    )
    lost_keys_min: int = Field(
        3, ge=1, description="SUMMARY_LOST_KEYS needs a summary's parents to hold this many keys"
    )
    lost_keys_kept: float = Field(
        0.5,
        ge=0,
        le=1,
        description="SUMMARY_LOST_KEYS when the live set keeps fewer than this share of them",
    )
    thrash_after: int = Field(
        3, ge=1, description="thin rewrites in a row that raise COMPACTION_THRASHING"
    )
    thrash_within_turns: int = Field(
        2, ge=0, description="a thin rewrite counts only this many turns after the one before"
    )
    thrash_min_reduction: float = Field(
        0.1,
        ge=0,
        le=1,
        description="a rewrite is thin when it cuts live tokens by less than this share",
    )
    dedup_window: int = Field(10_000, ge=0, description="accepted event ids kept per session")
    max_live_spans: int = Field(
        20_000,
        ge=0,
        description=(
            "live spans per session; an event that would make more live is rejected "
            "LIMIT_REACHED; 0: no limit"
        ),
    )
    max_live_sessions: int = Field(
        100_000,
        ge=0,
        description=(
            "live sessions per input partition; the first event of one more is rejected "
            "LIMIT_REACHED; 0: no limit"
        ),
    )
    max_gone_spans: int = Field(
        4096,
        ge=0,
        description=(
            "evicted spans remembered per session (for ALREADY_EVICTED, lineage and "
            "SUMMARY_LOST_KEYS); the oldest are forgotten past it; 0: no limit"
        ),
    )
    max_event_bytes: int = Field(1 << 20, ge=1024, description="larger inputs are TOO_LARGE")
    dead_letter_raw_limit: int = Field(
        64 * 1024,
        ge=1024,
        le=192 * 1024,
        description=(
            "bytes of a rejected input (and of its key, and of its headers' values) kept in "
            "its dead letter; at most 192 KiB, so a dead letter always fits a 1 MiB request"
        ),
    )
    emit_surfaces: bool = Field(
        False, description="keep a mention's text surface in state and pins (it is span text)"
    )
    clear_keys: bool = Field(False, description="store and emit referent keys unhashed")
    hash_types: bool = Field(False, description="hash referent types too")
    secret: SecretStr = Field(SecretStr(DEV_SECRET), description="deployment secret for keys")

    def severity(self, kind: FaultKind) -> Severity:
        """The configured severity of ``kind``."""
        return self.severities.get(kind, DEFAULT_SEVERITY[kind])
