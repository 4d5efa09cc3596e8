"""Optional export of faults, pins and decisions as OpenTelemetry log records (OTLP/HTTP).

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
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from schemas import EvictionDecided, IntegrityFault, OutputEvent, SpanPinned

log = logging.getLogger(__name__)

LOGS_PATH = "/v1/logs"
SEVERITY_NUMBER = {"info": 9, "warning": 13, "critical": 17}
"""OpenTelemetry severity numbers: INFO, WARN, ERROR."""
MAX_LISTED = 64
"""Span ids per attribute list (a decision over a huge context is cut, its count kept)."""


def logs_endpoint(url: str) -> str:
    """``http://collector:4318`` (or ``.../v1/logs``) -> the OTLP/HTTP logs endpoint."""
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"OTLP endpoint must start with http:// or https://: {url!r}")
    base = url.rstrip("/")
    return base if base.endswith(LOGS_PATH) else base + LOGS_PATH


def log_record(event: OutputEvent, source: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The log record of one output (``event_name``, ``severity_text``,
    ``severity_number``, ``body``, ``attributes``), or None for outputs not exported.
    ``source`` is the input event that caused it (for the agent's name and id)."""
    attributes: dict[str, Any] = {
        "gen_ai.conversation.id": event.session_id,
        "spanguard.tenant": event.tenant,
        "spanguard.caused_by": event.caused_by or "",
    }
    for field, name in (("agent_name", "gen_ai.agent.name"), ("agent_id", "gen_ai.agent.id")):
        value = source.get(field) if source is not None else None
        if isinstance(value, str) and value:
            attributes[name] = value
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


class OtlpLogExport:
    """Emits the log records of outputs through an OTLP/HTTP exporter, batched."""

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
            from opentelemetry._logs import SeverityNumber
            from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
            from opentelemetry.sdk._logs import LoggerProvider
            from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
            from opentelemetry.sdk.resources import Resource
        except ImportError as exc:
            raise ImportError(
                "OTLP export needs the otel extra: pip install 'spanguard[otel]'"
            ) from exc
        resource = Resource.create(
            {"service.name": service_name, "service.version": service_version}
        )
        self.provider = LoggerProvider(resource=resource)
        exporter = OTLPLogExporter(
            endpoint=logs_endpoint(endpoint), headers=dict(headers or {}), timeout=timeout
        )
        self.provider.add_log_record_processor(
            BatchLogRecordProcessor(
                counting_exporter(exporter, on_failure), schedule_delay_millis=schedule_delay_ms
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

    def flush(self, timeout_ms: int = 10_000) -> bool:
        """Export what is queued now; True when it all went out."""
        return bool(self.provider.force_flush(timeout_ms))

    def shutdown(self) -> None:
        """Flush and stop the background exporter."""
        self.provider.shutdown()


def counting_exporter(exporter: Any, on_failure: Callable[[], None] | None) -> Any:
    """``exporter`` wrapped to call ``on_failure`` for each batch it could not deliver."""
    from opentelemetry.sdk._logs.export import LogRecordExporter

    class Counting(LogRecordExporter):
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
