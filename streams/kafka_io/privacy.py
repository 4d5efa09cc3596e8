"""Proving that span text and clear referent keys stay out of everything spanguard writes.

The contract: state, changelogs and every output topic hold hashes, never span
text, and referent keys only as keyed hashes (unless ``clear_keys``); only the
dead-letter topic keeps raw input. :func:`privacy_scan` checks it after the fact:
it takes the trace that was processed, collects its *needles* (every span text of
8 characters or more, and every referent key the project's extractor finds in
those texts or the harness sent), then searches every topic of the deployment
(except the input and dead-letter topics, which hold raw input by design) and,
optionally, the worker's data directory.

Limits, stated: a needle is searched as UTF-8 and as it looks inside a JSON
string (escaped, and ASCII-escaped); data that is compressed or encoded
otherwise on disk (a compressed RocksDB block, base64) is not decoded. Keys are
matched case-insensitively as whole tokens; a key that is also an identifier
the harness chose for the envelope (a session, span or event id, a tenant) is
not searched, because ids are allowed in outputs.
"""

from __future__ import annotations

import bisect
import hashlib
import json
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from spanguard.streams.engine.referents import extract
from spanguard.streams.kafka_io.security import aiokafka_security

__all__ = [
    "MIN_TEXT_CHARS",
    "Finding",
    "Needles",
    "PrivacyReport",
    "needles_from_trace",
    "privacy_scan",
    "scan_directory",
    "scan_records",
    "scan_topics",
    "scanned_topics",
]

#: Span texts shorter than this are not searched (too likely to occur by chance).
MIN_TEXT_CHARS = 8
#: ``hmac-sha256:<hex>``: a hashed key; blanked before keys are searched as tokens.
_HASHED = re.compile(rb"hmac-sha256:[0-9a-f]+")
_TOKEN_SPLIT = re.compile(r"[^0-9a-z]+")
_TEXT_FIELDS = ("text", "surface")
#: Seconds without a record, while records are known to be left, before a scan gives up.
_STALL_S = 30.0


@dataclass(frozen=True, slots=True)
class Needles:
    """What must not be found.

    Attributes:
        texts: Span texts of at least :data:`MIN_TEXT_CHARS` characters.
        keys: Referent keys (case-folded), in clear.
        skipped_keys: Keys not searched because the harness also used them as ids.
    """

    texts: tuple[str, ...]
    keys: tuple[str, ...]
    skipped_keys: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Finding:
    """One needle found somewhere.

    Attributes:
        where: ``topic[partition]@offset`` or a file path.
        kind: ``span text`` or ``referent key``.
        preview: The first characters of the needle (never more than 12).
        needle_sha256: The needle's sha256, to find it in the trace without printing it.
    """

    where: str
    kind: str
    preview: str
    needle_sha256: str

    def describe(self) -> str:
        """One line for a report."""
        return f"{self.where}: {self.kind} {self.preview!r}... (sha256 {self.needle_sha256[:16]})"


@dataclass
class PrivacyReport:
    """The result of a scan: where it looked, what it searched for, what it found."""

    needles: Needles
    topics: list[str] = field(default_factory=list)
    records: int = 0
    files: int = 0
    findings: list[Finding] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        """True when nothing was found."""
        return not self.findings


# --------------------------------------------------------------------------- needles


def _walk(value: Any, texts: list[str], keys: list[str], ids: set[str], name: str = "") -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            if key in ("introduces", "mentions") and isinstance(item, list):
                for ref in item:
                    if isinstance(ref, dict) and isinstance(ref.get("key"), str):
                        keys.append(ref["key"].casefold())
                    if isinstance(ref, dict) and isinstance(ref.get("surface"), str):
                        texts.append(ref["surface"])
            else:
                _walk(item, texts, keys, ids, str(key))
    elif isinstance(value, list):
        for item in value:
            _walk(item, texts, keys, ids, name)
    elif isinstance(value, str):
        if name in _TEXT_FIELDS:
            texts.append(value)
        else:
            ids.update(t for t in _TOKEN_SPLIT.split(value.casefold()) if t)


def needles_from_trace(lines: Iterable[bytes]) -> Needles:
    """The span texts and referent keys of a trace (one input event per line).

    Texts come from every ``text`` field (``span.added``, rewrite snapshots) and
    mention ``surface``; keys from the project's extractor run on every text, and
    from the harness's own ``introduces`` / ``mentions``. Unparsable lines are skipped.
    """
    texts: list[str] = []
    keys: list[str] = []
    ids: set[str] = set()
    for line in lines:
        try:
            event = json.loads(line)
        except (ValueError, RecursionError):
            continue
        _walk(event, texts, keys, ids)
    for text in texts:
        keys.extend(identifier.key for identifier in extract(text).identifiers)
    unique_keys = sorted(set(keys))
    searched = tuple(k for k in unique_keys if not _is_id(k, ids))
    skipped = tuple(k for k in unique_keys if _is_id(k, ids))
    long_texts = tuple(sorted({t for t in texts if len(t) >= MIN_TEXT_CHARS}))
    return Needles(long_texts, searched, skipped)


def _is_id(key: str, ids: set[str]) -> bool:
    tokens = [t for t in _TOKEN_SPLIT.split(key) if t]
    return bool(tokens) and all(t in ids for t in tokens)


def _text_forms(text: str) -> set[bytes]:
    return {
        text.encode("utf-8"),
        orjson.dumps(text)[1:-1],  # as orjson writes it inside a JSON string
        json.dumps(text)[1:-1].encode("ascii"),  # ASCII-escaped JSON
    }


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# --------------------------------------------------------------------------- search


@dataclass(frozen=True, slots=True)
class _Compiled:
    texts: list[tuple[str, set[bytes]]]
    keys: re.Pattern[bytes] | None


def _compile(needles: Needles) -> _Compiled:
    pattern = None
    if needles.keys:
        alternatives = b"|".join(
            re.escape(k.encode("utf-8")) for k in sorted(needles.keys, key=len, reverse=True)
        )
        pattern = re.compile(rb"(?<![0-9a-z])(?:" + alternatives + rb")(?![0-9a-z])")
    return _Compiled([(t, _text_forms(t)) for t in needles.texts], pattern)


def _search(blob: bytes, compiled: _Compiled) -> list[tuple[int, str, str]]:
    """(position, kind, needle) of every needle found in ``blob`` (first hit per needle)."""
    hits: list[tuple[int, str, str]] = []
    for text, forms in compiled.texts:
        positions = [p for p in (blob.find(form) for form in forms) if p >= 0]
        if positions:
            hits.append((min(positions), "span text", text))
    if compiled.keys is not None:
        lowered = _HASHED.sub(lambda m: b" " * len(m.group(0)), blob.lower())
        seen: set[bytes] = set()
        for match in compiled.keys.finditer(lowered):
            if match.group(0) not in seen:
                seen.add(match.group(0))
                hits.append((match.start(), "referent key", match.group(0).decode("utf-8")))
    return hits


def _finding(where: str, kind: str, needle: str) -> Finding:
    return Finding(where, kind, needle[:12], _sha(needle))


def scan_records(
    records: Sequence[tuple[str, bytes]], needles: Needles, compiled: _Compiled | None = None
) -> list[Finding]:
    """Search ``(where, bytes)`` records (joined, so each needle is one fast search)."""
    compiled = compiled or _compile(needles)
    starts: list[int] = []
    parts: list[bytes] = []
    size = 0
    for _, data in records:
        starts.append(size)
        parts.append(data)
        size += len(data) + 1
    blob = b"\x00".join(parts)
    return [
        _finding(records[bisect.bisect_right(starts, position) - 1][0], kind, needle)
        for position, kind, needle in _search(blob, compiled)
    ]


def scan_directory(path: Path, needles: Needles) -> tuple[int, list[Finding]]:
    """Search every regular file under ``path``; returns (files scanned, findings)."""
    compiled = _compile(needles)
    findings: list[Finding] = []
    files = 0
    for file in sorted(p for p in path.rglob("*") if p.is_file() and not p.is_symlink()):
        files += 1
        try:
            data = file.read_bytes()
        except OSError:
            continue
        findings.extend(scan_records([(str(file), data)], needles, compiled))
    return files, findings


def scanned_topics(all_topics: Iterable[str], prefix: str, app_id: str | None = None) -> list[str]:
    """The topics a scan reads: ``<prefix>.*`` and the app's own ``<app_id>.*`` /
    ``<app_id>-*`` (state changelog, fleet and framework topics), except
    ``<prefix>.events`` (raw input) and ``<prefix>.deadletter`` (raw input, by design)."""
    excluded = {f"{prefix}.events", f"{prefix}.deadletter"}
    owned = [f"{prefix}."]
    if app_id is not None:
        owned += [f"{app_id}.", f"{app_id}-"]
    return sorted(
        t for t in all_topics if t not in excluded and any(t.startswith(o) for o in owned)
    )


async def scan_topics(
    bootstrap: str,
    topics: Sequence[str],
    needles: Needles,
    security: Mapping[str, Any] | None = None,
) -> tuple[int, list[Finding]]:
    """Read ``topics`` from their beginnings to their current ends (keys, values and
    headers; aborted transactions included: they are on disk too) and search them.
    Returns (records read, findings)."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        enable_auto_commit=False,
        group_id=None,
        isolation_level="read_uncommitted",
        **(security or {}),
    )
    compiled = _compile(needles)
    count = 0
    findings: list[Finding] = []
    if not topics:
        return 0, []
    try:
        counts = await _partition_counts(bootstrap, topics, security)
        await consumer.start()
        partitions = [TopicPartition(t, p) for t in topics for p in range(counts.get(t, 0))]
        missing = sorted(set(topics) - {tp.topic for tp in partitions})
        if missing:
            raise ValueError(f"no such topic: {', '.join(missing)}")
        # end offsets first: asked right after assign(), aiokafka 0.14 sometimes answers 0
        ends = await consumer.end_offsets(partitions)
        consumer.assign(partitions)
        await consumer.seek_to_beginning(*partitions)
        for tp in partitions:
            records: list[tuple[str, bytes]] = []
            end = ends[tp]
            while True:
                idle_since = time.monotonic()
                while await consumer.position(tp) < end:
                    if time.monotonic() - idle_since > _STALL_S:
                        raise TimeoutError(
                            f"could not read {tp.topic}[{tp.partition}] up to offset {end}"
                        )
                    batch = await consumer.getmany(tp, timeout_ms=1000, max_records=5000)
                    if batch:
                        idle_since = time.monotonic()
                    for record in batch.get(tp, []):
                        records.append(
                            (f"{tp.topic}[{tp.partition}]@{record.offset}", _bytes(record))
                        )
                # asked again once read: an end that was wrong (or records that came
                # since) is read too, so a scan never passes on a partition it skipped
                end = (await consumer.end_offsets([tp]))[tp]
                if await consumer.position(tp) >= end:
                    break
            count += len(records)
            findings.extend(scan_records(records, needles, compiled))
    finally:
        await consumer.stop()
    return count, findings


def _bytes(record: Any) -> bytes:
    """Key, value and headers of a consumed record, as one searchable string."""
    headers = b"".join(k.encode() + b"=" + v for k, v in record.headers or ())
    return (record.key or b"") + b"\x00" + (record.value or b"") + b"\x00" + headers


async def _partition_counts(
    bootstrap: str, topics: Sequence[str] | None, security: Mapping[str, Any] | None
) -> dict[str, int]:
    """Partitions per topic (of ``topics``, or of every topic when None)."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, **(security or {}))
    try:
        await admin.start()
        described = await admin.describe_topics(list(topics) if topics is not None else None)
    finally:
        await admin.close()
    return {
        entry["topic"]: len(entry["partitions"])
        for entry in described
        if entry.get("error_code", 0) == 0
    }


async def privacy_scan(
    settings: Any,
    trace_lines: Iterable[bytes],
    data_dir: Path | None = None,
    extra_topics: Sequence[str] = (),
) -> PrivacyReport:
    """Scan a deployment for the texts and clear keys of a processed trace.

    ``settings`` is a :class:`spanguard.streams.settings.Settings`: its broker, credentials,
    topic prefix and app id say where to look. Call it after a worker has processed
    ``trace_lines``; ``report.clean`` is the verdict.
    """
    from spanguard.streams.kafka_io.bootstrap import bootstrap_servers

    needles = needles_from_trace(trace_lines)
    report = PrivacyReport(needles)
    bootstrap = bootstrap_servers(settings.broker)
    security = aiokafka_security(settings.broker_credentials)
    all_topics = await _partition_counts(bootstrap, None, security)
    report.topics = sorted(
        {*scanned_topics(all_topics, settings.topic_prefix, settings.app_id), *extra_topics}
    )
    report.records, findings = await scan_topics(bootstrap, report.topics, needles, security)
    report.findings.extend(findings)
    if data_dir is not None:
        report.files, found = scan_directory(data_dir, needles)
        report.findings.extend(found)
    return report
