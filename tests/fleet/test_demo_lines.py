"""The demo's lines: everything refused is shown (brackets are not markup), alerts
name rule and severity, every fault says what it is about; events in wall time."""

from __future__ import annotations

import io
import time
from datetime import datetime

import orjson
from rich.console import Console

from spanguard.schemas import EvictionDecided, IntegrityFault, Severity
from spanguard.streams.cli.demo_lines import demo_line, in_wall_time
from spanguard.streams.engine.engine import Engine, Source
from spanguard.streams.fleet.aggregates import Window
from spanguard.streams.fleet.alerts import make_alert
from spanguard.streams.sim.scenarios import demo_fleet


def printed(event: object) -> str:
    out = io.StringIO()
    Console(file=out, width=300, color_system=None).print(demo_line(event))  # type: ignore[arg-type]
    return out.getvalue().rstrip("\n")


def outputs() -> list[object]:
    engine = Engine()
    found: list[object] = []
    for n, line in enumerate(demo_fleet(8)):
        found.extend(engine.process_raw(line, Source("demo", 0, n)))
    return found


def test_decisions_show_what_was_refused_and_why() -> None:
    partial = [o for o in outputs() if isinstance(o, EvictionDecided) and o.refused]
    assert partial
    for decision in partial:
        text = printed(decision)
        first = decision.refused[0]
        assert f"refused=[{first.span_id}:{first.reason.value}" in text, text


def test_every_fault_line_says_what_it_is_about() -> None:
    faults = [o for o in outputs() if isinstance(o, IntegrityFault)]
    kinds = {f.kind.value for f in faults}
    assert {"SEQUENCE_GAP", "MONOTONIC_DRIFT", "UNGATED_EVICTION"} <= kinds
    for fault in faults:
        text = printed(fault)
        assert "spans=" not in text
        about = text.split(fault.session_id, 1)[1].strip()
        assert about and about != "spans", text
        if fault.kind.value == "SEQUENCE_GAP":
            assert "missing" in about
        if fault.kind.value == "MONOTONIC_DRIFT":
            assert "rewrites in a row" in about


def test_alert_lines_name_rule_and_severity() -> None:
    alert = make_alert(
        "acme", "critical-fault", Severity.CRITICAL, "firing", Window(0, 60), 3, ["s[1]"], 61
    )
    text = printed(alert)
    assert "FIRING" in text and "critical-fault (critical)" in text and "tenant=acme" in text
    assert "s[1]" in text


def test_the_demo_fleet_is_stamped_when_sent() -> None:
    before = time.time()
    stamped = [orjson.loads(line) for line in in_wall_time(demo_fleet(2)[:5])]
    after = time.time()
    for event in stamped:
        ts = datetime.fromisoformat(event["ts"].replace("Z", "+00:00")).timestamp()
        assert before - 0.001 <= ts <= after + 0.001
    assert list(in_wall_time([b"{not json"])) == [b"{not json"]
