"""Deployment settings: environment (``SPANGUARD_*``) and an optional TOML file.

This module is the one place that lists them; ``docs/settings.md`` is generated
from it. Precedence: explicit arguments > environment > file > defaults. The
file is the one named by ``--config``, else ``$SPANGUARD_CONFIG``, else
``./spanguard.toml`` when it exists.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, SecretStr, ValidationError
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from schemas import FaultKind, Severity
from streams.engine.config import DEV_SECRET, EngineSettings
from streams.fleet.config import FleetSettings
from streams.kafka_io.security import BrokerCredentials


class Settings(BaseSettings):
    """Every setting of a spanguard deployment."""

    model_config = SettingsConfigDict(env_prefix="SPANGUARD_", extra="forbid", frozen=True)

    # Kafka
    broker: str = Field("kafka://127.0.0.1:9092", description="bootstrap servers (Faust URL form)")
    topic_prefix: str = Field("spanguard", description="prefix of every topic name")
    partitions: int = Field(4, ge=1, description="partitions of topics spanguard creates")
    replication: int = Field(1, ge=1, description="replication factor of created topics")
    processing_guarantee: Literal["at_least_once", "exactly_once"] = Field(
        "at_least_once", description="exactly_once uses Kafka transactions"
    )
    app_id: str = Field("spanguard", description="consumer group and changelog topic prefix")
    data_dir: Path = Field(Path(".spanguard"), description="worker state directory (RocksDB)")
    session_timeout: float = Field(
        10.0,
        gt=0,
        description="Kafka consumer session timeout (s): how fast a dead worker is noticed",
    )
    ack_journal: Path | None = Field(
        None, description="append every output's broker ack (topic, partition, offset, time) here"
    )
    batch_size: int = Field(500, ge=1, description="input records processed per batch at most")
    batch_within: float = Field(
        0.005, gt=0, description="seconds to wait for input when none is waiting"
    )
    commit_interval: float | None = Field(
        None,
        gt=0,
        description=(
            "seconds between checkpoints of a partition (changelog + offsets in one "
            "transaction); default 1.0 at-least-once, 0.1 exactly-once (there it is "
            "also the outputs' added latency)"
        ),
    )
    commit_every: int = Field(
        20_000, ge=1, description="input records after which a partition is checkpointed"
    )
    io_timeout: float = Field(
        30.0, gt=0, description="longest wait for the broker before a step is retried"
    )
    fleet: FleetSettings = Field(
        default_factory=FleetSettings,
        description="fleet monitoring: windows, rules, Alertmanager, OTLP (docs/monitoring.md)",
    )
    broker_credentials: BrokerCredentials | None = Field(
        None,
        description=(
            "TLS and SASL to Kafka for every client of the worker: username, password or "
            "password_file, mechanism (SCRAM-SHA-512), cafile, ... (docs/security.md)"
        ),
    )
    # web
    web_enabled: bool = Field(True, description="serve /metrics, the API and the dashboard")
    web_host: str = Field("127.0.0.1", description="address the worker's web server binds")
    web_port: int = Field(6066, ge=1, le=65535, description="port of /metrics, API, dashboard")
    api_token: SecretStr | None = Field(None, description="bearer token for the API, if set")
    # engine
    secret: SecretStr = Field(SecretStr(DEV_SECRET), description="key-hashing secret")
    drift_tolerance: float = Field(
        0.05, ge=0, description="relative rise of mean relevance that counts as drift"
    )
    protect_lineage: bool = Field(
        False, description="refuse (LINEAGE) evicting spans a live span cites in derived_from"
    )
    poisoned: Literal["drop", "flag"] = Field(
        "drop", description="poisoned spans: drop at the next decision, or only flag"
    )
    stall_after: int = Field(3, ge=1, description="FREEZEs in a row that raise PRUNING_STALLED")
    balloon_ratio: float = Field(
        1.0, ge=0, description="SUMMARY_BALLOONING above this x the rewritten span's sources"
    )
    min_summary_tokens: int = Field(
        3, ge=0, description="EMPTY_SUMMARY below this many tokens (with enough parent tokens)"
    )
    empty_summary_parent_factor: int = Field(
        25, ge=1, description="EMPTY_SUMMARY needs parents with this x min_summary_tokens"
    )
    dedup_window: int = Field(10_000, ge=0, description="accepted event ids remembered per session")
    max_event_bytes: int = Field(1 << 20, ge=1024, description="larger input records are TOO_LARGE")
    dead_letter_raw_limit: int = Field(
        64 * 1024,
        ge=1024,
        le=192 * 1024,
        description="bytes of a rejected input (and its key, headers) kept in its dead letter",
    )
    emit_surfaces: bool = Field(
        False, description="keep mention surfaces (span text) in state and pins"
    )
    clear_keys: bool = Field(False, description="store and emit referent keys unhashed")
    hash_types: bool = Field(False, description="hash referent types too")
    severities: dict[FaultKind, Severity] = Field(
        default_factory=dict, description="severity overrides per fault kind"
    )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Arguments, then environment, then the TOML file."""
        return (init_settings, env_settings, TomlConfigSettingsSource(settings_cls))

    def engine_settings(self) -> EngineSettings:
        """The engine's part of the settings."""
        return EngineSettings(
            drift_tolerance=self.drift_tolerance,
            severities=self.severities,
            protect_lineage=self.protect_lineage,
            poisoned=self.poisoned,
            stall_after=self.stall_after,
            balloon_ratio=self.balloon_ratio,
            min_summary_tokens=self.min_summary_tokens,
            empty_summary_parent_factor=self.empty_summary_parent_factor,
            dedup_window=self.dedup_window,
            max_event_bytes=self.max_event_bytes,
            dead_letter_raw_limit=self.dead_letter_raw_limit,
            emit_surfaces=self.emit_surfaces,
            clear_keys=self.clear_keys,
            hash_types=self.hash_types,
            secret=self.secret,
        )

    def topic(self, suffix: str) -> str:
        """The full name of a contract topic (``events``, ``faults``, ...)."""
        return f"{self.topic_prefix}.{suffix}"


def _config_file() -> Path | None:
    env = os.environ.get("SPANGUARD_CONFIG")
    if env:
        return Path(env)
    local = Path("spanguard.toml")
    return local if local.exists() else None


def load_settings(config: Path | None = None, **overrides: Any) -> Settings:
    """Load settings; raises ``ValueError`` with a readable message when invalid."""
    path = config or _config_file()
    if path is not None and not path.is_file():
        raise ValueError(f"settings file {path} does not exist")

    class FileSettings(Settings):
        model_config = SettingsConfigDict(toml_file=path)

    try:
        return FileSettings(**overrides)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'settings'}: {e['msg']}" for e in exc.errors()
        )
        raise ValueError(f"invalid settings: {problems}") from exc
    except (OSError, ValueError) as exc:
        raise ValueError(f"cannot read settings file {path}: {exc}") from exc


def settings_markdown() -> str:
    """The settings reference (``docs/settings.md``), generated from :class:`Settings`."""
    rows = [
        "# Settings",
        "",
        "Generated by `python -m streams.settings` from `streams/settings.py`; do not edit.",
        "",
        "Every setting comes from the environment (`SPANGUARD_<NAME>`), or from a TOML",
        "file (`--config`, `$SPANGUARD_CONFIG`, or `./spanguard.toml`) with the same",
        "names in lower case. Environment wins over the file. Dict settings take JSON",
        'in the environment, e.g. `SPANGUARD_SEVERITIES=\'{"STALE_SCORE": "critical"}\'`.',
        "",
        "| environment | default | meaning |",
        "| --- | --- | --- |",
    ]
    for name, field in Settings.model_fields.items():
        default = field.get_default(call_default_factory=True)
        if isinstance(default, SecretStr):
            default = "(development secret)" if name == "secret" else "(unset)"
        shown = "" if default is None else f"`{default}`"
        if isinstance(default, BaseModel):
            shown = "see docs/monitoring.md"
        rows.append(f"| `SPANGUARD_{name.upper()}` | {shown} | {field.description or ''} |")
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    Path("docs/settings.md").write_text(settings_markdown(), encoding="utf-8")
    print("wrote docs/settings.md")
