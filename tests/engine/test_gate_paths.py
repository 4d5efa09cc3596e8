"""The gate's bulk paths (pins from the whole referent index at once, removal by
filtering each index) give exactly what its per-candidate paths give: the same
outputs, byte for byte, and the same state, at several session sizes."""

from __future__ import annotations

import random
from contextlib import ExitStack
from unittest.mock import patch

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spanguard.schemas.codec import encode_output
from spanguard.streams.engine import gate, state
from spanguard.streams.engine.engine import Engine, Source
from spanguard.streams.engine.trace import SessionScript
from tests.engine.test_state import snapshot

TYPES = ["account", "ticket", "order"]
NEVER, ALWAYS = 0, 10**9
"""``GATE_BULK_SHARE`` values that make every removal indexed (``n * 0 > live`` never
holds) or bulk (any non-empty removal is more than ``live / 10**9``)."""


@st.composite
def sessions(draw: st.DrawFn) -> SessionScript:
    """A session of 3 to 150 spans sharing keys and types (holdings, explicit key
    mentions, anaphors, a few summaries), mostly scored, then eviction requests
    of every kind and size: a few spans, about half, nearly all."""
    size = draw(st.sampled_from([3, 12, 60, 150]))
    rng = draw(st.randoms(use_true_random=False))
    keys = [f"K-{i}" for i in range(max(2, size // 3))]
    s = SessionScript()
    for i in range(size):
        held = [
            {"key": rng.choice(keys), "type": rng.choice(TYPES)} for _ in range(rng.randint(0, 2))
        ]
        mentions = [_mention(rng, keys) for _ in range(rng.choice([0, 0, 1, 2]))]
        parents = [f"s{rng.randrange(i)}"] if i and rng.random() < 0.05 else None
        s.add(
            f"s{i}",
            f"span {i} text",
            introduces=held or None,
            mentions=mentions or None,
            derived_from=parents,
        )
    s.score(*[(f"s{i}", rng.random()) for i in range(size) if rng.random() < 0.9])
    for _ in range(rng.randint(1, 4)):
        kind = rng.choice(["keep", "threshold", "candidates"])
        if kind == "keep":
            s.evict(keep_top_k=rng.randint(0, size))
        elif kind == "threshold":
            s.evict(threshold=rng.random())
        else:
            chosen = rng.sample(range(size + 2), rng.randint(1, size + 2))
            s.evict([f"s{i}" for i in chosen], basis=rng.choice([None, "recency"]))
    return s


def _mention(rng: random.Random, keys: list[str]) -> dict[str, str]:
    if rng.random() < 0.3:
        return {"key": rng.choice(keys), "type": rng.choice(TYPES)}
    return {"type": rng.choice(TYPES)}


def _replay(script: SessionScript, share: int) -> tuple[list[bytes], tuple[object, ...]]:
    engine = Engine()
    outputs: list[bytes] = []
    with ExitStack() as stack:
        for module in (gate, state):
            stack.enter_context(patch.object(module, "GATE_BULK_SHARE", share))
        for i, line in enumerate(script.lines()):
            outputs.extend(encode_output(o) for o in engine.process_raw(line, Source("t", 0, i)))
    session = engine.session(script.tenant, script.session_id)
    assert session is not None
    return outputs, snapshot(session)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sessions())
def test_bulk_gate_equals_the_per_candidate_gate(script: SessionScript) -> None:
    indexed, bulk = _replay(script, NEVER), _replay(script, ALWAYS)
    assert bulk[0] == indexed[0]
    assert bulk[1] == indexed[1]
