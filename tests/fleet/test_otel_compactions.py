"""OpenTelemetry export of compactions: one ``gen_ai.conversation.compacted`` span per
``context.compacted``, received by a local OTLP/HTTP receiver that decodes the
protobuf of ``/v1/traces`` (and ``/v1/logs``) the way a collector does."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import orjson
import pytest
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Status

from spanguard.schemas import ContextCompacted, IntegrityFault
from spanguard.streams.fleet.otel import (
    COMPACTED_SPAN,
    OtlpExport,
    OtlpTraceExport,
    compaction_span,
    traces_endpoint,
)
from spanguard.streams.localbroker.broker import free_ports
from tests.fleet.compactions import T0, clean, lost_keys, split_pair, thrashing


class Receiver:
    """An OTLP/HTTP endpoint for logs and traces: decodes every request, answers 200."""

    def __init__(self) -> None:
        self.traces: list[ExportTraceServiceRequest] = []
        self.logs: list[ExportLogsServiceRequest] = []
        self.paths: list[str] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                receiver.paths.append(self.path)
                if self.path == "/v1/traces":
                    request: Any = ExportTraceServiceRequest()
                    receiver.traces.append(request)
                else:
                    request = ExportLogsServiceRequest()
                    receiver.logs.append(request)
                request.ParseFromString(body)
                self.send_response(200 if self.path in ("/v1/traces", "/v1/logs") else 404)
                self.send_header("Content-Type", "application/x-protobuf")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def spans(self) -> list[dict[str, Any]]:
        """Every received span: name, times, attributes, events, status, service."""
        found = []
        for request in self.traces:
            for resource_spans in request.resource_spans:
                service = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
                for scope in resource_spans.scope_spans:
                    for span in scope.spans:
                        found.append(
                            {
                                "name": span.name,
                                "start": span.start_time_unix_nano,
                                "end": span.end_time_unix_nano,
                                "parent": span.parent_span_id,
                                "attributes": {a.key: _value(a.value) for a in span.attributes},
                                "events": [
                                    (e.name, {a.key: _value(a.value) for a in e.attributes})
                                    for e in span.events
                                ],
                                "status": (span.status.code, span.status.message),
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


def trace() -> list[tuple[dict[str, Any], list[Any]]]:
    """(input event, outputs) of a few rewrites: clean, lost keys, split pair, thrashing."""
    made = [
        clean("acme", "s1", 4, T0),
        lost_keys("acme", "s1", 9, T0 + 30),
        split_pair("acme", "s2", 5, T0 + 40),
        thrashing("beta", "s3", 12, T0 + 50),
    ]
    made[0].strategy = made[0].trigger = None
    return [(orjson.loads(c.record()), c.outputs()) for c in made]


def test_each_compaction_is_one_span_with_spanguard_attributes(receiver: Receiver) -> None:
    failures: list[int] = []
    export = OtlpTraceExport(receiver.url, on_failure=lambda: failures.append(1))
    runs = trace()
    for source, outputs in runs:
        export.export(source, outputs)
    assert export.flush()
    export.shutdown()
    compactions = [o for _, outs in runs for o in outs if isinstance(o, ContextCompacted)]
    faults = {o.fault_id: o for _, outs in runs for o in outs if isinstance(o, IntegrityFault)}
    spans = receiver.spans()
    assert failures == [] and set(receiver.paths) == {"/v1/traces"}
    assert len(spans) == len(compactions) == 4
    by_id = {s["attributes"]["spanguard.output.id"]: s for s in spans}
    for event in compactions:
        span = by_id[event.compaction_id]
        attributes = span["attributes"]
        assert span["name"] == COMPACTED_SPAN and span["service"] == "spanguard"
        assert span["parent"] == b""  # a root span
        assert span["start"] == span["end"] == int(event.ts.timestamp() * 1e9)
        assert attributes["gen_ai.conversation.id"] == event.session_id
        assert attributes["gen_ai.agent.name"] == "planner"
        assert attributes["spanguard.tenant"] == event.tenant
        assert attributes["spanguard.session_id"] == event.session_id
        assert attributes["spanguard.rewrite_id"] == event.rewrite_id
        assert attributes["spanguard.compaction.outcome"] == event.outcome
        assert attributes["spanguard.compaction.tokens_before"] == event.tokens_before
        assert attributes["spanguard.compaction.tokens_after"] == event.tokens_after
        assert attributes["spanguard.compaction.removed_count"] == len(event.removed)
        assert attributes["spanguard.compaction.dropped_count"] == len(event.removed) + len(
            event.merged
        )
        assert attributes["spanguard.compaction.keys_lost"] == max(
            0, event.keys_before - event.keys_after
        )
        assert attributes.get("spanguard.compaction.strategy") == event.strategy
        assert attributes.get("spanguard.compaction.trigger") == event.trigger
        assert [e[1]["spanguard.output.id"] for e in span["events"]] == event.faults
        assert [e[1]["spanguard.fault.kind"] for e in span["events"]] == [
            faults[f].kind.value for f in event.faults
        ]
        if event.outcome == "critical":
            assert span["status"][0] == Status.STATUS_CODE_ERROR
            assert all(faults[f].kind.value in span["status"][1] for f in event.faults)
        else:
            assert span["status"][0] == Status.STATUS_CODE_UNSET
    first = by_id[compactions[0].compaction_id]["attributes"]
    assert "spanguard.compaction.strategy" not in first  # absent, not an empty string
    split = by_id[compactions[2].compaction_id]["attributes"]
    assert split["spanguard.compaction.removed"] == ["a3"]
    assert split["spanguard.compaction.strategy"] == "sliding_window"


def test_both_exports_share_the_collector(receiver: Receiver) -> None:
    """OtlpExport (what the worker runs): faults as log records, compactions as spans."""
    export = OtlpExport(receiver.url, service_version="9.9")
    for source, outputs in trace():
        export.export(source, outputs)
    assert export.flush()
    export.shutdown()
    assert set(receiver.paths) == {"/v1/traces", "/v1/logs"}
    records = [r for req in receiver.logs for rl in req.resource_logs for s in rl.scope_logs
               for r in s.log_records]  # fmt: skip
    assert len(records) == 4  # lost keys 1, split pair 2, thrashing 1
    assert len(receiver.spans()) == 4


def test_a_span_without_faults_or_agent_and_failed_sends() -> None:
    event = next(o for _, outs in trace() for o in outs if isinstance(o, ContextCompacted))
    made = compaction_span(event, None)
    assert made["events"] == [] and made["error"] is None
    assert "gen_ai.agent.name" not in made["attributes"]
    assert traces_endpoint("http://c:4318/") == "http://c:4318/v1/traces"
    assert traces_endpoint("http://c:4318/v1/logs") == "http://c:4318/v1/traces"
    with pytest.raises(ValueError, match="http"):
        traces_endpoint("c:4318")
    [port] = free_ports(1)
    failures: list[int] = []
    export = OtlpTraceExport(
        f"http://127.0.0.1:{port}", timeout=1, on_failure=lambda: failures.append(1)
    )
    source, outputs = trace()[2]
    export.export(source, outputs)
    export.flush()
    export.shutdown()
    assert failures
