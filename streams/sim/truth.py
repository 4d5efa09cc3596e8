"""The truth file of a simulated fleet: what the engine must say about it.

For every session: whether it is healthy, the faults injected into it
(``{session_id, tenant, kind, at_event_id}``, from the injections registry,
each confirmed by the reference model of :mod:`spanguard.streams.reference` when the
step was planned), the dead-letter reasons its malformed records must get,
and for every eviction request what the contract prescribes and which
requested spans bind a referent a retained span needs. Only the file's data
and its reading and writing live here; nothing of it models the contract.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import orjson

TRUTH_FORMAT = "spanguard-sim-truth"
TRUTH_VERSION = 1


@dataclass(frozen=True, slots=True)
class FaultTruth:
    """One injected fault: the engine must raise ``kind`` in this session,
    caused by the input event ``at_event_id``."""

    session_id: str
    tenant: str
    kind: str
    at_event_id: str
    injection: str
    """The injection that caused it (a fault-mix name, e.g. ``POISONED_SPAN``)."""
    span_ids: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class DeadLetterTruth:
    """One malformed record and the ``event.rejected`` reason it must get.

    ``event_id`` is None when the record has no readable identity (broken
    JSON); ``line`` is its 0-based line in the events file (the ``offset`` that
    ``spanguard replay`` gives the rejection), -1 until the fleet is written.
    """

    session_id: str | None
    tenant: str | None
    reason: str
    event_id: str | None
    line: int = -1


@dataclass(frozen=True, slots=True)
class EvictionTruth:
    """One ``eviction.requested`` and what the generator knows about it.

    ``requested``: the spans a naive pruner would evict (the candidates, or the
    policy's selection on bound scores). ``needed``: those among them that bind
    a referent a retained span needs (directly or through another needed
    span): evicting them "would have destroyed a live referent".
    ``expected_*``: the decision the contract prescribes, from the reference model.
    """

    session_id: str
    tenant: str
    request_id: str
    event_id: str
    mode: str
    basis: str
    requested: tuple[str, ...]
    needed: tuple[str, ...]
    expected_action: str
    expected_committed: tuple[str, ...]
    expected_dropped: tuple[str, ...]


@dataclass(slots=True)
class SessionTruth:
    """Everything known about one simulated session."""

    session_id: str
    tenant: str
    profile: str
    referent_dense: bool
    events: int = 0
    injections: list[str] = field(default_factory=list)
    """Injections placed in this session (fault-mix names)."""
    skipped: list[str] = field(default_factory=list)
    """Injections that found no place before the session ended (nothing injected)."""
    lookalikes: list[str] = field(default_factory=list)
    """Healthy look-alikes placed in this session (contract 1.2: steps that resemble
    an injection and must raise nothing; names of ``LOOKALIKES``)."""
    faults: list[FaultTruth] = field(default_factory=list)
    deadletters: list[DeadLetterTruth] = field(default_factory=list)
    evictions: list[EvictionTruth] = field(default_factory=list)

    @property
    def healthy(self) -> bool:
        """No injected fault and no malformed record."""
        return not self.faults and not self.deadletters


@dataclass(slots=True)
class FleetTruth:
    """The truth file of one ``spanguard simulate`` run."""

    generator: dict[str, Any]
    sessions: list[SessionTruth]
    events_file: str | None = None
    events_lines: int = 0
    events_sha256: str = ""

    def session(self, session_id: str) -> SessionTruth | None:
        """The session with this id, or None."""
        return self._index().get(session_id)

    def _index(self) -> dict[str, SessionTruth]:
        return {s.session_id: s for s in self.sessions}

    def to_json(self) -> bytes:
        """Deterministic JSON (sorted keys, two-space indent, trailing newline)."""
        data: dict[str, Any] = {
            "format": TRUTH_FORMAT,
            "version": TRUTH_VERSION,
            "generator": self.generator,
            "events": {
                "file": self.events_file,
                "lines": self.events_lines,
                "sha256": self.events_sha256,
            },
            "summary": self.summary(),
            "sessions": [_session_json(s) for s in self.sessions],
        }
        return orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n"

    def summary(self) -> dict[str, Any]:
        """Counts for people: sessions, healthy ones, faults by kind, dead letters by reason."""
        kinds: dict[str, int] = {}
        reasons: dict[str, int] = {}
        for s in self.sessions:
            for f in s.faults:
                kinds[f.kind] = kinds.get(f.kind, 0) + 1
            for d in s.deadletters:
                reasons[d.reason] = reasons.get(d.reason, 0) + 1
        requests = [e for s in self.sessions for e in s.evictions]
        lookalikes: dict[str, int] = {}
        for s in self.sessions:
            for name in s.lookalikes:
                lookalikes[name] = lookalikes.get(name, 0) + 1
        return {
            "sessions": len(self.sessions),
            "healthy_sessions": sum(s.healthy for s in self.sessions),
            "referent_dense_sessions": sum(s.referent_dense for s in self.sessions),
            "faults": dict(sorted(kinds.items())),
            "deadletters": dict(sorted(reasons.items())),
            "skipped_injections": sum(len(s.skipped) for s in self.sessions),
            "lookalikes": dict(sorted(lookalikes.items())),
            "eviction_requests": len(requests),
            "requested_spans": sum(len(e.requested) for e in requests),
            "needed_spans": sum(len(e.needed) for e in requests),
        }

    @classmethod
    def from_json(cls, raw: bytes) -> FleetTruth:
        """Parse a truth file (raises ``ValueError`` when it is not one)."""
        data = orjson.loads(raw)
        if not isinstance(data, dict) or data.get("format") != TRUTH_FORMAT:
            raise ValueError("not a spanguard simulator truth file")
        if data.get("version") != TRUTH_VERSION:
            raise ValueError(f"unsupported truth file version {data.get('version')!r}")
        events = data.get("events") or {}
        return cls(
            generator=dict(data.get("generator") or {}),
            sessions=[_session_from(s) for s in data["sessions"]],
            events_file=events.get("file"),
            events_lines=int(events.get("lines", 0)),
            events_sha256=str(events.get("sha256", "")),
        )

    @classmethod
    def load(cls, path: Path) -> FleetTruth:
        """Read a truth file."""
        return cls.from_json(path.read_bytes())


def _session_json(s: SessionTruth) -> dict[str, Any]:
    return {
        "session_id": s.session_id,
        "tenant": s.tenant,
        "profile": s.profile,
        "referent_dense": s.referent_dense,
        "healthy": s.healthy,
        "events": s.events,
        "injections": s.injections,
        "skipped_injections": s.skipped,
        "lookalikes": s.lookalikes,
        "faults": [asdict(f) for f in s.faults],
        "deadletters": [asdict(d) for d in s.deadletters],
        "evictions": [asdict(e) for e in s.evictions],
    }


def _session_from(data: dict[str, Any]) -> SessionTruth:
    return SessionTruth(
        session_id=data["session_id"],
        tenant=data["tenant"],
        profile=data["profile"],
        referent_dense=bool(data["referent_dense"]),
        events=int(data.get("events", 0)),
        injections=list(data.get("injections", [])),
        skipped=list(data.get("skipped_injections", [])),
        lookalikes=list(data.get("lookalikes", [])),
        faults=[
            FaultTruth(**{**f, "span_ids": tuple(f.get("span_ids", ()))}) for f in data["faults"]
        ],
        deadletters=[DeadLetterTruth(**d) for d in data["deadletters"]],
        evictions=[
            EvictionTruth(
                **{
                    **e,
                    "requested": tuple(e["requested"]),
                    "needed": tuple(e["needed"]),
                    "expected_committed": tuple(e["expected_committed"]),
                    "expected_dropped": tuple(e["expected_dropped"]),
                }
            )
            for e in data["evictions"]
        ],
    )
