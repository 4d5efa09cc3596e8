"""Export one JSON Schema file per event type into ``schemas/json/``.

Run ``python -m spanguard.schemas.export`` after changing a model; a test fails when the
checked-in files and the models drift apart.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from spanguard.schemas.inputs import INPUT_TYPES
from spanguard.schemas.outputs import (
    ContextCompacted,
    EventRejected,
    EvictionDecided,
    FleetAlert,
    IntegrityFault,
    ScoresRecomputeRequested,
    SpanPinned,
)

JSON_DIR = Path(__file__).parent / "json"

OUTPUT_TYPES: dict[str, type[BaseModel]] = {
    "integrity.fault": IntegrityFault,
    "span.pinned": SpanPinned,
    "scores.recompute_requested": ScoresRecomputeRequested,
    "eviction.decided": EvictionDecided,
    "context.compacted": ContextCompacted,
    "fleet.alert": FleetAlert,
    "event.rejected": EventRejected,
}


def render_schemas() -> dict[str, str]:
    """File name -> JSON Schema text, for every input and output event type."""
    rendered: dict[str, str] = {}
    models: dict[str, type[BaseModel]] = {**INPUT_TYPES, **OUTPUT_TYPES}
    for type_name, model in sorted(models.items()):
        mode: Literal["validation", "serialization"] = (
            "validation" if type_name in INPUT_TYPES else "serialization"
        )
        schema = model.model_json_schema(mode=mode)
        schema["$id"] = f"https://spanguard.dev/schemas/v1/{type_name}.json"
        rendered[f"{type_name}.json"] = json.dumps(schema, indent=2, sort_keys=True) + "\n"
    return rendered


def main() -> None:
    """Write every schema file and remove files of types that no longer exist."""
    JSON_DIR.mkdir(exist_ok=True)
    rendered = render_schemas()
    for stale in JSON_DIR.glob("*.json"):
        if stale.name not in rendered:
            stale.unlink()
    for name, text in rendered.items():
        (JSON_DIR / name).write_text(text, encoding="utf-8")
    print(f"wrote {len(rendered)} schemas to {JSON_DIR}")


if __name__ == "__main__":
    main()
