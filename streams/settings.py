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

from pydantic import BaseModel, Field, SecretStr, ValidationError, field_validator
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from spanguard.streams.engine.config import EngineSettings
from spanguard.streams.fleet.config import FleetSettings
from spanguard.streams.kafka_io.bootstrap import bootstrap_servers
from spanguard.streams.kafka_io.security import BrokerCredentials


class Settings(BaseSettings):
    """Every setting of a spanguard deployment."""

    model_config = SettingsConfigDict(
        env_prefix="SPANGUARD_", env_nested_delimiter="__", extra="forbid", frozen=True
    )

    # Kafka
    broker: str = Field(
        "kafka://127.0.0.1:9092",
        description="bootstrap servers: host:port[,host:port...] or kafka://host:port[;...]",
    )
    topic_prefix: str = Field("spanguard", description="prefix of every topic name")
    partitions: int = Field(4, ge=1, description="partitions of topics spanguard creates")
    replication: int = Field(1, ge=1, description="replication factor of created topics")
    processing_guarantee: Literal["at_least_once", "exactly_once"] = Field(
        "at_least_once", description="exactly_once uses Kafka transactions"
    )
    app_id: str = Field("spanguard", description="consumer group and changelog topic prefix")
    data_dir: Path = Field(
        Path(".spanguard"),
        description="the worker's own data directory (state lives in the changelog)",
    )
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
    fetch_wait: float = Field(
        0.005,
        gt=0,
        description=(
            "seconds the broker may hold a fetch of input with nothing new: a record on a "
            "partition left out of the fetch in flight waits up to this long (lower: a "
            "faster gate under load, more fetch requests while idle)"
        ),
    )
    max_pending_batches: int = Field(
        32,
        ge=1,
        description=(
            "batches of a partition whose outputs may await the broker's acknowledgement "
            "while the next batches are processed (at-least-once; exactly-once keeps one): "
            "at the limit a step waits for the oldest"
        ),
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
    engine: EngineSettings = Field(
        default_factory=EngineSettings,
        description="the integrity rules: secret, tolerances, severities (table below)",
    )

    @field_validator("broker")
    @classmethod
    def _addresses(cls, broker: str) -> str:
        """A broker list no client could read fails here, not at the first connection."""
        bootstrap_servers(broker)
        return broker

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

    def topic(self, suffix: str) -> str:
        """The full name of a contract topic (``events``, ``faults``, ...)."""
        return f"{self.topic_prefix}.{suffix}"


def _config_file() -> Path | None:
    env = os.environ.get("SPANGUARD_CONFIG")
    if env:
        return Path(env)
    local = Path("spanguard.toml")
    return local if local.exists() else None


#: Engine settings that were top-level (``SPANGUARD_SECRET``, ...) before 0.2. A leftover
#: must fail loudly: read silently as nothing, it would put the development secret in
#: production.
_MOVED_TO_ENGINE = frozenset(EngineSettings.model_fields) - frozenset(Settings.model_fields)


def _moved_variables() -> list[str]:
    present = {name.upper() for name in os.environ}
    return [
        f"SPANGUARD_{name.upper()} is now SPANGUARD_ENGINE__{name.upper()}"
        for name in sorted(_MOVED_TO_ENGINE)
        if f"SPANGUARD_{name.upper()}" in present
    ]


def _problem(error: Any) -> str:
    where = ".".join(str(p) for p in error["loc"]) or "settings"
    if error["type"] == "extra_forbidden" and where in _MOVED_TO_ENGINE:
        return f"{where}: moved to the [engine] table (engine.{where})"
    return f"{where}: {error['msg']}"


def load_settings(config: Path | None = None, **overrides: Any) -> Settings:
    """Load settings; raises ``ValueError`` with a readable message when invalid."""
    moved = _moved_variables()
    if moved:
        raise ValueError("renamed settings in the environment: " + "; ".join(moved))
    path = config or _config_file()
    if path is not None and not path.is_file():
        raise ValueError(f"settings file {path} does not exist")

    class FileSettings(Settings):
        model_config = SettingsConfigDict(toml_file=path)

    try:
        return FileSettings(**overrides)
    except ValidationError as exc:
        problems = "; ".join(_problem(e) for e in exc.errors())
        raise ValueError(f"invalid settings: {problems}") from exc
    except (OSError, ValueError) as exc:
        raise ValueError(f"cannot read settings file {path}: {exc}") from exc


def _row(variable: str, field: FieldInfo, secret_name: str) -> str:
    default = field.get_default(call_default_factory=True)
    if isinstance(default, SecretStr):
        default = "(development secret)" if secret_name == "secret" else "(unset)"
    shown = "" if default is None else f"`{default}`"
    if isinstance(default, BaseModel):
        shown = "see docs/monitoring.md"
    return f"| `{variable}` | {shown} | {field.description or ''} |"


def settings_markdown() -> str:
    """The settings reference (``docs/settings.md``), generated from :class:`Settings`."""
    rows = [
        "# Settings",
        "",
        "Generated by `python -m spanguard.streams.settings` from `streams/settings.py`;"
        " do not edit.",
        "",
        "Every setting comes from the environment (`SPANGUARD_<NAME>`), or from a TOML",
        "file (`--config`, `$SPANGUARD_CONFIG`, or `./spanguard.toml`) with the same",
        "names in lower case. Environment wins over the file. A nested setting is",
        "`SPANGUARD_<GROUP>__<NAME>` in the environment and `<name>` in the file's",
        "`[<group>]` table; a whole group also takes JSON, e.g.",
        "`SPANGUARD_FLEET='{\"enabled\": false}'`. Dict settings take JSON, e.g.",
        '`SPANGUARD_ENGINE__SEVERITIES=\'{"STALE_SCORE": "critical"}\'`.',
        "",
        "| environment | default | meaning |",
        "| --- | --- | --- |",
    ]
    for name, field in Settings.model_fields.items():
        if name != "engine":
            rows.append(_row(f"SPANGUARD_{name.upper()}", field, name))
    rows += [
        "",
        "## The integrity rules (`[engine]`)",
        "",
        "| environment | default | meaning |",
        "| --- | --- | --- |",
    ]
    for name, field in EngineSettings.model_fields.items():
        rows.append(_row(f"SPANGUARD_ENGINE__{name.upper()}", field, name))
    rows += [
        "",
        "## Upgrading from 0.1",
        "",
        "The integrity rules' settings moved from the top level into `engine`:",
        "`SPANGUARD_SECRET` is now `SPANGUARD_ENGINE__SECRET`, a file's `secret = ...`",
        "goes under `[engine]`, and so on for every row of the table above. A setting",
        "left under its old name stops the worker with a message naming the new one;",
        "it is never ignored (the development secret would take its place).",
    ]
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    Path("docs/settings.md").write_text(settings_markdown(), encoding="utf-8")
    print("wrote docs/settings.md")
