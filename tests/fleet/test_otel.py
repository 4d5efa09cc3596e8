"""OpenTelemetry export: faults, pins and decisions as OTLP/HTTP log records, received
by a local OTLP/HTTP receiver that decodes the protobuf the way a collector does."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import orjson
import pytest
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

from spanguard.schemas import EvictionDecided, IntegrityFault, SpanPinned
from spanguard.streams.engine.engine import Engine, Source
from spanguard.streams.fleet.otel import OtlpLogExport, log_record, logs_endpoint
from spanguard.streams.localbroker.broker import free_ports
from spanguard.streams.sim.scenarios import demo_fleet


class Receiver:
    """An OTLP/HTTP logs endpoint: decodes every request and answers 200."""

    def __init__(self) -> None:
        self.requests: list[ExportLogsServiceRequest] = []
        self.content_types: list[str] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                request = ExportLogsServiceRequest()
                request.ParseFromString(body)
                receiver.requests.append(request)
                receiver.content_types.append(self.headers.get("Content-Type", ""))
                self.send_response(200 if self.path == "/v1/logs" else 404)
                self.send_header("Content-Type", "application/x-protobuf")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def records(self) -> list[dict[str, Any]]:
        """Every received log record as {event_name, severity, body, attributes, service}."""
        found = []
        for request in self.requests:
            for resource_logs in request.resource_logs:
                service = {a.key: _value(a.value) for a in resource_logs.resource.attributes}
                for scope in resource_logs.scope_logs:
                    for record in scope.log_records:
                        found.append(
                            {
                                "event_name": record.event_name,
                                "severity": record.severity_text,
                                "body": record.body.string_value,
                                "attributes": {a.key: _value(a.value) for a in record.attributes},
                                "service": service.get("service.name"),
                            }
                        )
        return found

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _value(value: Any) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in value.array_value.values]
    return getattr(value, kind)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    made = Receiver()
    try:
        yield made
    finally:
        made.close()


def processed() -> list[tuple[dict[str, Any] | None, list[Any]]]:
    engine = Engine()
    runs = []
    for n, line in enumerate(demo_fleet(4)):
        source = orjson.loads(line)
        source["agent_name"] = "planner"
        runs.append((source, engine.process_raw(orjson.dumps(source), Source("t", 0, n))))
    return runs


def test_outputs_arrive_as_log_records_with_gen_ai_attributes(receiver: Receiver) -> None:
    failures: list[int] = []
    export = OtlpLogExport(
        receiver.url, service_version="9.9", on_failure=lambda: failures.append(1)
    )
    runs = processed()
    for source, outputs in runs:
        export.export(source, outputs)
    assert export.flush()
    export.shutdown()
    exported = [
        o
        for _, outs in runs
        for o in outs
        if isinstance(o, IntegrityFault | SpanPinned | EvictionDecided)
    ]
    records = receiver.records()
    assert len(records) == len(exported) and failures == []
    assert set(receiver.content_types) == {"application/x-protobuf"}
    by_id = {r["attributes"]["spanguard.output.id"]: r for r in records}
    for event in exported:
        record = by_id[
            getattr(
                event,
                {
                    "integrity.fault": "fault_id",
                    "span.pinned": "pin_id",
                    "eviction.decided": "decision_id",
                }[event.type],
            )
        ]
        attributes = record["attributes"]
        assert record["event_name"] == f"spanguard.{event.type}"
        assert record["service"] == "spanguard"
        assert attributes["gen_ai.conversation.id"] == event.session_id
        assert attributes["gen_ai.agent.name"] == "planner"
        assert attributes["spanguard.tenant"] == event.tenant
        if isinstance(event, IntegrityFault):
            assert attributes["spanguard.fault.kind"] == event.kind.value
            assert record["severity"] == event.severity.value.upper()
        if isinstance(event, EvictionDecided):
            assert attributes["spanguard.decision.refused"] == [
                f"{r.span_id}:{r.reason.value}" for r in event.refused
            ]
    # Ids, kinds and counts only: no input text travels.
    texts = [
        s["text"] for s, _ in runs if s and isinstance(s.get("text"), str) and len(s["text"]) > 8
    ]
    blob = orjson.dumps(records).decode()
    assert texts and not any(text in blob for text in texts)


def test_a_collector_that_is_down_counts_failures() -> None:
    [port] = free_ports(1)
    failures: list[int] = []
    export = OtlpLogExport(
        f"http://127.0.0.1:{port}", timeout=1, on_failure=lambda: failures.append(1)
    )
    source, outputs = next((s, o) for s, o in processed() if o)
    export.export(source, outputs)
    export.flush()
    export.shutdown()
    assert failures


def test_only_faults_pins_and_decisions_are_exported() -> None:
    kinds = {o.type for _, outs in processed() for o in outs if log_record(o, None) is not None}
    assert kinds == {"integrity.fault", "span.pinned", "eviction.decided"}
    assert logs_endpoint("http://c:4318/") == "http://c:4318/v1/logs"
    with pytest.raises(ValueError, match="http"):
        logs_endpoint("c:4318")
