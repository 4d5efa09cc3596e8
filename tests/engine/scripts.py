"""Random session scripts for the property tests (shared by the engine and Kafka tests)."""

from __future__ import annotations

from hypothesis import strategies as st

from spanguard.streams.engine.trace import SessionScript

SPANS = [f"s{i}" for i in range(8)]
TYPES = ["account", "ticket"]
KEYS = ["A-1", "A-2", "T-9"]

span_ids = st.sampled_from(SPANS)


@st.composite
def actions(draw: st.DrawFn) -> list[tuple]:  # type: ignore[type-arg]
    return draw(
        st.lists(
            st.one_of(
                st.tuples(
                    st.just("add"),
                    span_ids,
                    st.integers(0, 2),
                    st.integers(0, 2),
                    st.sampled_from([None, 1, 40]),
                ),
                st.tuples(
                    st.just("score"),
                    st.lists(st.tuples(span_ids, st.floats(0, 1)), max_size=4),
                    st.booleans(),
                ),
                st.tuples(
                    st.just("rewrite"),
                    st.lists(span_ids, max_size=6, unique=True),
                    st.lists(span_ids, max_size=3),
                    st.booleans(),
                    st.sampled_from([None, 0, 1, 2, 100]),
                ),
                st.tuples(st.just("evict"), st.lists(span_ids, max_size=4, unique=True)),
                st.tuples(st.just("policy"), st.one_of(st.floats(0, 1), st.integers(0, 6))),
                st.tuples(st.just("recency"), st.lists(span_ids, max_size=3, unique=True)),
            ),
            max_size=40,
        )
    )


def build(script_actions: list[tuple]) -> SessionScript:  # type: ignore[type-arg]
    s = SessionScript()
    version = 0
    for action in script_actions:
        kind = action[0]
        if kind == "add":
            _, sid, key_i, men_i, tokens = action
            intro = [{"key": KEYS[key_i], "type": TYPES[key_i % 2]}] if key_i < 2 else None
            mention = [{"type": TYPES[men_i % 2]}] if men_i < 2 else None
            s.add(sid, f"{sid} v{version}", introduces=intro, mentions=mention, tokens=tokens)
        elif kind == "score":
            _, pairs, stale = action
            s.score(*pairs, against={p[0]: "other" for p in pairs[:1]} if stale else None)
        elif kind == "rewrite":
            _, keep, modify, merge, merged_tokens = action
            version += 1
            entries = [
                {"span_id": sid, "text": f"{sid} v{version}"} if sid in modify else {"span_id": sid}
                for sid in keep
            ]
            if merge:
                merged: dict[str, object] = {
                    "span_id": f"m{version}",
                    "text": "" if merged_tokens == 0 else "merged",
                    "derived_from": SPANS[:3],
                }
                if merged_tokens is not None:
                    merged["tokens"] = merged_tokens
                entries.append(merged)
            s.rewrite(entries, declared_modified=modify)
        elif kind == "evict":
            s.evict(action[1])
        elif kind == "policy":
            value = action[1]
            if isinstance(value, int):
                s.evict(keep_top_k=value)
            else:
                s.evict(threshold=value)
        else:
            s.evict(action[1], basis="recency")
    return s
