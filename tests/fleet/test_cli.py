"""The command line's surface: --version, help pages without type noise, demo ports."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from spanguard.streams.cli.main import app
from spanguard.streams.version import build_version

COMMANDS = [[], ["replay"], ["worker"], ["produce"], ["consume"], ["demo"], ["check-rules"]]


def test_version() -> None:
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.output.strip() == f"spanguard {build_version()}"
    assert re.fullmatch(r"spanguard \d+\.\d+\.\d+\S*", result.output.strip())


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c) or "spanguard")
def test_help_pages_have_no_bool_noise(command: list[str]) -> None:
    result = CliRunner().invoke(app, [*command, "--help"])
    assert result.exit_code == 0, result.output
    assert "<bool>" not in result.output
    assert "Usage: spanguard" in result.output


def test_demo_takes_broker_controller_and_web_ports() -> None:
    result = CliRunner().invoke(app, ["demo", "--help"])
    for option in ("--port", "--controller-port", "--web-port"):
        assert option in result.output
