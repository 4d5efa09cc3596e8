"""Settings: environment, file, validation errors, and the generated reference."""

from pathlib import Path

import pytest

from streams.settings import load_settings, settings_markdown

ROOT = Path(__file__).resolve().parents[2]


def test_reference_is_up_to_date() -> None:
    assert (ROOT / "docs/settings.md").read_text() == settings_markdown(), (
        "run: python -m streams.settings"
    )


def test_environment_beats_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "spanguard.toml"
    config.write_text('topic_prefix = "from-file"\npartitions = 8\nprotect_lineage = true\n')
    monkeypatch.setenv("SPANGUARD_TOPIC_PREFIX", "from-env")
    settings = load_settings(config)
    assert settings.topic_prefix == "from-env"
    assert settings.partitions == 8
    assert settings.engine_settings().protect_lineage is True
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
        ("poisoned = 'burn'\n", "poisoned"),
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
