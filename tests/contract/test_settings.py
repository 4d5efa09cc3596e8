"""Settings: environment, file, validation errors, and the generated reference."""

from pathlib import Path

import pytest

from spanguard.schemas import FaultKind
from spanguard.streams.settings import load_settings, settings_markdown

ROOT = Path(__file__).resolve().parents[2]


def test_reference_is_up_to_date() -> None:
    assert (ROOT / "docs/settings.md").read_text() == settings_markdown(), (
        "run: python -m spanguard.streams.settings"
    )


def test_environment_beats_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "spanguard.toml"
    config.write_text(
        'topic_prefix = "from-file"\npartitions = 8\n[engine]\nprotect_lineage = true\n'
    )
    monkeypatch.setenv("SPANGUARD_TOPIC_PREFIX", "from-env")
    settings = load_settings(config)
    assert settings.topic_prefix == "from-env"
    assert settings.partitions == 8
    assert settings.engine.protect_lineage is True
    assert settings.topic("events") == "from-env.events"


def test_defaults_without_configuration(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    settings = load_settings()
    assert settings.web_port == 6066 and settings.broker == "kafka://127.0.0.1:9092"


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("partitions = 0\n", "partitions"),
        ("nonsense = 1\n", "nonsense"),
        ("[engine]\npoisoned = 'burn'\n", "engine.poisoned"),
        ("secret = 'x'\n", r"secret: moved to the \[engine\] table"),
    ],
)
def test_invalid_settings_are_clear_errors(tmp_path: Path, text: str, problem: str) -> None:
    config = tmp_path / "bad.toml"
    config.write_text(text)
    with pytest.raises(ValueError, match=problem):
        load_settings(config)


def test_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="does not exist"):
        load_settings(tmp_path / "nope.toml")


def test_nested_environment_variables(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SPANGUARD_ENGINE__SECRET", "s3cret")
    monkeypatch.setenv("SPANGUARD_ENGINE__SEVERITIES", '{"STALE_SCORE": "critical"}')
    monkeypatch.setenv("SPANGUARD_FLEET__ENABLED", "false")
    settings = load_settings()
    assert settings.engine.secret.get_secret_value() == "s3cret"
    assert settings.engine.severity(FaultKind.STALE_SCORE) == "critical"
    assert settings.fleet.enabled is False


@pytest.mark.parametrize("name", ["SPANGUARD_SECRET", "spanguard_clear_keys"])
def test_a_variable_under_its_old_name_is_refused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, name: str
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(name, "x")
    with pytest.raises(ValueError, match=f"{name.upper()} is now SPANGUARD_ENGINE__"):
        load_settings()
