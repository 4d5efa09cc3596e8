"""Optional OpenTelemetry export (OTLP/HTTP): faults, pins and decisions as log
records, and one span per compaction.

With the ``otel`` extra installed (``pip install 'spanguard[otel]'``) and the
fleet setting ``otlp_endpoint`` set (e.g. ``http://collector:4318``), every
``integrity.fault``, ``span.pinned`` and ``eviction.decided`` a worker produces
is also emitted as one OpenTelemetry log record, batched in the background
and POSTed to ``<endpoint>/v1/logs``. Attributes follow the GenAI semantic
conventions where they have a name for the thing (``gen_ai.conversation.id``
is the session id; ``gen_ai.agent.name`` / ``gen_ai.agent.id`` when the input
event carries ``agent_name`` / ``agent_id``) and ``spanguard.*`` otherwise.
Records hold ids, kinds and counts only: no span text, no evidence, no
referent keys. Export is best effort (a worker that restarts may export a
record again; ``spanguard.output.id`` is stable for deduplication); a batch
the collector does not accept counts ``spanguard_send_failures_total{target="otlp"}``.

Each ``context.compacted`` (contract 1.2) is also one **span**, named
``gen_ai.conversation.compacted`` (the GenAI conventions' name for the thing),
POSTed to ``<endpoint>/v1/traces``: a root span at the rewrite's event time
(zero length: the rewrite is an instant in the session), with the compaction's
figures as ``spanguard.compaction.*`` attributes, one span event per fault the
compaction lists, and status ``ERROR`` for a ``critical`` outcome
(:func:`compaction_span`). :class:`OtlpExport` runs both exports.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from spanguard.schemas import (
    ContextCompacted,
    EvictionDecided,
    IntegrityFault,
    OutputEvent,
    SpanPinned,
)

log = logging.getLogger(__name__)

LOGS_PATH = "/v1/logs"
TRACES_PATH = "/v1/traces"
COMPACTED_SPAN = "gen_ai.conversation.compacted"
"""The name of a compaction's span."""
FAULT_EVENT = "spanguard.integrity.fault"
"""The name of a compaction span's events (one per fault it lists)."""
SEVERITY_NUMBER = {"info": 9, "warning": 13, "critical": 17}
"""OpenTelemetry severity numbers: INFO, WARN, ERROR."""
MAX_LISTED = 64
"""Span ids per attribute list (a decision over a huge context is cut, its count kept)."""


def logs_endpoint(url: str) -> str:
    """``http://collector:4318`` (or ``.../v1/logs``) -> the OTLP/HTTP logs endpoint."""
    return _endpoint(url, LOGS_PATH)


def traces_endpoint(url: str) -> str:
    """``http://collector:4318`` (or ``.../v1/logs``, ``.../v1/traces``) -> the
    OTLP/HTTP traces endpoint."""
    return _endpoint(url, TRACES_PATH)


def _endpoint(url: str, path: str) -> str:
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"OTLP endpoint must start with http:// or https://: {url!r}")
    base = url.rstrip("/")
    for known in (LOGS_PATH, TRACES_PATH):
        if base.endswith(known):
            base = base[: -len(known)]
    return base + path


def _agent(source: Mapping[str, Any] | None) -> dict[str, str]:
    """``gen_ai.agent.name`` / ``gen_ai.agent.id`` from the input event, when present."""
    found: dict[str, str] = {}
    for field, name in (("agent_name", "gen_ai.agent.name"), ("agent_id", "gen_ai.agent.id")):
        value = source.get(field) if source is not None else None
        if isinstance(value, str) and value:
            found[name] = value
    return found


def compaction_span(
    event: ContextCompacted,
    source: Mapping[str, Any] | None,
    faults: Mapping[str, IntegrityFault] | None = None,
) -> dict[str, Any]:
    """The span of one compaction: ``name``, ``time`` (ns since the epoch, start and
    end), ``attributes``, ``events`` (``(name, attributes)`` per listed fault found
    in ``faults``, by id) and ``error`` (the status description for a critical
    outcome, else None). Ids, counts and names only."""
    attributes: dict[str, Any] = {
        "gen_ai.conversation.id": event.session_id,
        **_agent(source),
        "spanguard.tenant": event.tenant,
        "spanguard.session_id": event.session_id,
        "spanguard.caused_by": event.caused_by or "",
        "spanguard.output.id": event.compaction_id,
        "spanguard.rewrite_id": event.rewrite_id,
        "spanguard.compaction.outcome": event.outcome,
        "spanguard.compaction.tokens_before": event.tokens_before,
        "spanguard.compaction.tokens_after": event.tokens_after,
        "spanguard.compaction.tokens_saved": event.tokens_before - event.tokens_after,
        "spanguard.compaction.spans_before": event.spans_before,
        "spanguard.compaction.spans_after": event.spans_after,
        "spanguard.compaction.modified_count": len(event.modified),
        "spanguard.compaction.created_count": len(event.created),
        "spanguard.compaction.merged_count": len(event.merged),
        "spanguard.compaction.removed_count": len(event.removed),
        "spanguard.compaction.dropped_count": len(event.merged) + len(event.removed),
        "spanguard.compaction.removed": event.removed[:MAX_LISTED],
        "spanguard.compaction.keys_before": event.keys_before,
        "spanguard.compaction.keys_after": event.keys_after,
        "spanguard.compaction.keys_lost": max(0, event.keys_before - event.keys_after),
        "spanguard.compaction.faults": event.faults[:MAX_LISTED],
        "spanguard.compaction.fault_count": len(event.faults),
    }
    if event.strategy is not None:
        attributes["spanguard.compaction.strategy"] = event.strategy
    if event.trigger is not None:
        attributes["spanguard.compaction.trigger"] = event.trigger
    listed = [faults[f] for f in event.faults if f in faults] if faults else []
    events = [
        (
            FAULT_EVENT,
            {
                "spanguard.output.id": fault.fault_id,
                "spanguard.fault.kind": fault.kind.value,
                "spanguard.fault.severity": fault.severity.value,
                "spanguard.span_ids": fault.span_ids[:MAX_LISTED],
            },
        )
        for fault in listed
    ]
    error = None
    if event.outcome == "critical":
        kinds = sorted({f.kind.value for f in listed if f.severity.value == "critical"})
        error = "critical compaction" + (f": {', '.join(kinds)}" if kinds else "")
    return {
        "name": COMPACTED_SPAN,
        "time": int(event.ts.timestamp() * 1e9),
        "attributes": attributes,
        "events": events,
        "error": error,
    }


def log_record(event: OutputEvent, source: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The log record of one output (``event_name``, ``severity_text``,
    ``severity_number``, ``body``, ``attributes``), or None for outputs not exported.
    ``source`` is the input event that caused it (for the agent's name and id)."""
    attributes: dict[str, Any] = {
        "gen_ai.conversation.id": event.session_id,
        "spanguard.tenant": event.tenant,
        "spanguard.caused_by": event.caused_by or "",
        **_agent(source),
    }
    severity = "info"
    if isinstance(event, IntegrityFault):
        severity = event.severity.value
        attributes |= {
            "spanguard.output.id": event.fault_id,
            "spanguard.fault.kind": event.kind.value,
            "spanguard.fault.severity": severity,
            "spanguard.span_ids": event.span_ids[:MAX_LISTED],
            "spanguard.span_count": len(event.span_ids),
        }
        body = f"{event.kind.value} ({severity})"
    elif isinstance(event, SpanPinned):
        attributes |= {
            "spanguard.output.id": event.pin_id,
            "spanguard.span_id": event.span_id,
            "spanguard.request_id": event.request_id,
            "spanguard.pinned_for": event.pinned_for[:MAX_LISTED],
        }
        body = f"pinned {event.span_id}"
    elif isinstance(event, EvictionDecided):
        severity = "info" if event.action.value == "COMMIT" else "warning"
        attributes |= {
            "spanguard.output.id": event.decision_id,
            "spanguard.request_id": event.request_id,
            "spanguard.decision.action": event.action.value,
            "spanguard.decision.basis": event.basis,
            "spanguard.decision.committed": len(event.committed),
            "spanguard.decision.refused": [
                f"{r.span_id}:{r.reason.value}" for r in event.refused[:MAX_LISTED]
            ],
            "spanguard.decision.refused_count": len(event.refused),
            "spanguard.decision.dropped": len(event.dropped),
        }
        body = f"eviction {event.action.value}"
    else:
        return None
    return {
        "event_name": f"spanguard.{event.type}",
        "severity_text": severity.upper(),
        "severity_number": SEVERITY_NUMBER[severity],
        "body": body,
        "timestamp": int(event.ts.timestamp() * 1e9),
        "attributes": attributes,
    }


OTEL_MISSING = "OTLP export needs the otel extra: pip install 'spanguard[otel]'"


def service_resource(service_name: str, service_version: str) -> Any:
    """The OpenTelemetry resource both exports name their records with."""
    try:
        from opentelemetry.sdk.resources import Resource
    except ImportError as exc:
        raise ImportError(OTEL_MISSING) from exc
    return Resource.create({"service.name": service_name, "service.version": service_version})


@dataclass(frozen=True, slots=True)
class _Batching:
    """How an export sends: its collector's headers and timeout, what a lost batch
    calls, how long a batch waits."""

    headers: dict[str, str]
    timeout: float
    on_failure: Callable[[], None] | None
    schedule_delay_ms: int


class _ProviderExport(ABC):
    """What both exports share: the OpenTelemetry provider that batches and sends, and
    its options."""

    provider: Any

    def __init__(
        self,
        endpoint: str,
        *,
        headers: Mapping[str, str] | None = None,
        service_name: str = "spanguard",
        service_version: str = "",
        timeout: float = 10.0,
        on_failure: Callable[[], None] | None = None,
        schedule_delay_ms: int = 1000,
    ) -> None:
        """Raises ImportError with the extra to install when OpenTelemetry is missing."""
        try:
            self._start(
                endpoint,
                service_resource(service_name, service_version),
                _Batching(dict(headers or {}), timeout, on_failure, schedule_delay_ms),
            )
        except ImportError as exc:
            raise ImportError(OTEL_MISSING) from exc

    @abstractmethod
    def _start(self, endpoint: str, resource: Any, batching: _Batching) -> None:
        """Set up the provider and its batching exporter (imports OpenTelemetry)."""

    def flush(self, timeout_ms: int = 10_000) -> bool:
        """Export what is queued now; True when it all went out."""
        return bool(self.provider.force_flush(timeout_ms))

    def shutdown(self) -> None:
        """Flush and stop the background exporter."""
        self.provider.shutdown()


class OtlpLogExport(_ProviderExport):
    """Emits the log records of outputs through an OTLP/HTTP exporter, batched."""

    def _start(self, endpoint: str, resource: Any, batching: _Batching) -> None:
        from opentelemetry._logs import SeverityNumber
        from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
        from opentelemetry.sdk._logs import LoggerProvider
        from opentelemetry.sdk._logs.export import BatchLogRecordProcessor

        self.provider = LoggerProvider(resource=resource)
        exporter = OTLPLogExporter(
            endpoint=logs_endpoint(endpoint), headers=batching.headers, timeout=batching.timeout
        )
        self.provider.add_log_record_processor(
            BatchLogRecordProcessor(
                counting_exporter(exporter, batching.on_failure),
                schedule_delay_millis=batching.schedule_delay_ms,
            )
        )
        self.logger = self.provider.get_logger("spanguard")
        self._severity = SeverityNumber

    def export(self, source: Mapping[str, Any] | None, outputs: Sequence[OutputEvent]) -> None:
        """Emit the log records of ``outputs`` (never raises)."""
        for event in outputs:
            try:
                record = log_record(event, source)
                if record is None:
                    continue
                self.logger.emit(
                    timestamp=record["timestamp"],
                    severity_number=self._severity(record["severity_number"]),
                    severity_text=record["severity_text"],
                    body=record["body"],
                    attributes=record["attributes"],
                    event_name=record["event_name"],
                )
            except Exception:  # monitoring must never stop the guard
                log.exception("OTLP export of an output failed; it is skipped")


def counting_exporter(exporter: Any, on_failure: Callable[[], None] | None) -> Any:
    """``exporter`` (log records) wrapped to call ``on_failure`` for each batch it could
    not deliver."""
    from opentelemetry.sdk._logs.export import LogRecordExporter

    return _counting(LogRecordExporter, exporter, on_failure)


def _counting(base: type[Any], exporter: Any, on_failure: Callable[[], None] | None) -> Any:
    """``exporter`` as a ``base`` (the SDK's exporter interface for logs or spans) that
    calls ``on_failure`` for each batch it could not deliver."""

    class Counting(base):  # type: ignore[misc]
        def export(self, batch: Any) -> Any:
            result = exporter.export(batch)
            if getattr(result, "name", "") != "SUCCESS" and on_failure is not None:
                on_failure()
            return result

        def shutdown(self) -> None:
            exporter.shutdown()

        def force_flush(self, timeout_millis: int = 30_000) -> bool:
            return bool(exporter.force_flush(timeout_millis))

    return Counting()


class OtlpTraceExport(_ProviderExport):
    """Emits one span per ``context.compacted`` through an OTLP/HTTP span exporter,
    batched (:func:`compaction_span`)."""

    def _start(self, endpoint: str, resource: Any, batching: _Batching) -> None:
        from opentelemetry.context import Context
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
        from opentelemetry.trace import Status, StatusCode

        self.provider = TracerProvider(resource=resource)
        exporter = OTLPSpanExporter(
            endpoint=traces_endpoint(endpoint), headers=batching.headers, timeout=batching.timeout
        )
        self.provider.add_span_processor(
            BatchSpanProcessor(
                counting_span_exporter(exporter, batching.on_failure),
                schedule_delay_millis=batching.schedule_delay_ms,
            )
        )
        self.tracer = self.provider.get_tracer("spanguard")
        self._root = Context
        self._error = (Status, StatusCode)

    def export(self, source: Mapping[str, Any] | None, outputs: Sequence[OutputEvent]) -> None:
        """Emit the span of every compaction among ``outputs`` (never raises)."""
        faults = {o.fault_id: o for o in outputs if isinstance(o, IntegrityFault)}
        for event in outputs:
            if not isinstance(event, ContextCompacted):
                continue
            try:
                made = compaction_span(event, source, faults)
                span = self.tracer.start_span(
                    made["name"],
                    context=self._root(),  # a root span: not inside the worker's own spans
                    attributes=made["attributes"],
                    start_time=made["time"],
                )
                for name, attributes in made["events"]:
                    span.add_event(name, attributes, timestamp=made["time"])
                if made["error"] is not None:
                    status, code = self._error
                    span.set_status(status(code.ERROR, made["error"]))
                span.end(end_time=made["time"])
            except Exception:  # monitoring must never stop the guard
                log.exception("OTLP export of a compaction span failed; it is skipped")


class OtlpExport:
    """Both exports of a worker: log records (:class:`OtlpLogExport`) and compaction
    spans (:class:`OtlpTraceExport`) to the same collector."""

    def __init__(self, endpoint: str, **options: Any) -> None:
        """``options`` as for :class:`OtlpLogExport` (each export gets them)."""
        self.logs = OtlpLogExport(endpoint, **options)
        self.traces = OtlpTraceExport(endpoint, **options)

    def export(self, source: Mapping[str, Any] | None, outputs: Sequence[OutputEvent]) -> None:
        """Log records of faults, pins and decisions; spans of compactions (never raises)."""
        self.logs.export(source, outputs)
        self.traces.export(source, outputs)

    def flush(self, timeout_ms: int = 10_000) -> bool:
        """Export what is queued now in both; True when it all went out."""
        logs = self.logs.flush(timeout_ms)
        traces = self.traces.flush(timeout_ms)
        return logs and traces

    def shutdown(self) -> None:
        """Flush and stop both background exporters."""
        self.logs.shutdown()
        self.traces.shutdown()


def counting_span_exporter(exporter: Any, on_failure: Callable[[], None] | None) -> Any:
    """``exporter`` (spans) wrapped to call ``on_failure`` for each batch it could not
    deliver."""
    from opentelemetry.sdk.trace.export import SpanExporter

    return _counting(SpanExporter, exporter, on_failure)
