"""Referent keys held as digests (issue 22, item 2): the engine keeps a key's 32 raw
bytes, and every output and changelog record still carries ``hmac-sha256:<64 hex>``,
in the order the text forms sort, whatever mix of key forms a session holds."""

from __future__ import annotations

import hashlib
import random
import re

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spanguard.streams.engine.engine import Engine, Source
from spanguard.streams.engine.keys import HASH_PREFIX, key_text, sort_keyed, stored_key
from spanguard.streams.engine.trace import SessionScript
from spanguard.streams.sim import SimConfig, simulate
from tests.engine.test_gate_paths import ALWAYS, NEVER, _replay
from tests.engine.test_persist import run_split, run_whole

HASHED = re.compile(r"hmac-sha256:[0-9a-f]{64}")
CANONICAL = HASH_PREFIX + hashlib.sha256(b"pre-hashed").hexdigest()
"""A key the harness hashed itself, in the form the engine writes: held as bytes."""
OTHER_FORMS = [HASH_PREFIX + "ABC", HASH_PREFIX + hashlib.sha256(b"x").hexdigest().upper()]
"""Keys the harness hashed itself in another form: held as the strings they are."""


@given(st.binary(min_size=32, max_size=32))
def test_a_digest_in_text_form_is_held_as_its_bytes(raw: bytes) -> None:
    text = HASH_PREFIX + raw.hex()
    assert stored_key(text) == raw
    assert key_text(raw) == text


@given(st.text(max_size=80))
def test_any_other_key_is_held_as_given(text: str) -> None:
    key = stored_key(text)
    assert key_text(key) == text
    if isinstance(key, bytes):
        assert HASHED.fullmatch(text)


@given(st.lists(st.one_of(st.binary(min_size=32, max_size=32), st.text(max_size=70)), unique=True))
def test_stored_keys_sort_as_their_text_forms(keys: list[bytes | str]) -> None:
    items = [stored_key(key_text(key)) for key in keys]
    sort_keyed(items, None, key_text)
    assert [key_text(key) for key in items] == sorted(key_text(key) for key in keys)


def test_the_engine_holds_bytes_and_emits_text() -> None:
    s = SessionScript()
    s.add("a", "opened", introduces=[{"key": "ACC-1", "type": "account"}])
    s.add("b", "about it", mentions=[{"key": "acc-1"}])
    s.score(("a", 0.1), ("b", 0.9))
    s.evict(["a"])
    engine = Engine()
    outputs = engine.process_many(s.events())
    session = engine.session(s.tenant, s.session_id)
    assert session is not None
    key, _ = session.spans["a"].holds  # flat: one (key, type)
    assert isinstance(key, bytes) and len(key) == 32
    [pin] = [o for o in outputs if o.type == "span.pinned"]
    assert pin.mention.key is not None and HASHED.fullmatch(pin.mention.key)


def mixed_session(rng: random.Random, size: int) -> SessionScript:
    """Spans holding and mentioning keys of every form: raw (hashed by the engine),
    pre-hashed as the engine writes them, pre-hashed in other forms."""
    keys = ["K-1", "K-2", CANONICAL, *OTHER_FORMS]
    s = SessionScript()
    for i in range(size):
        held = [{"key": k, "type": "account"} for k in rng.sample(keys, rng.randint(0, 3))]
        mentioned = [{"key": k} for k in rng.sample(keys, rng.randint(0, 2))]
        s.add(f"s{i}", f"span {i}", introduces=held or None, mentions=mentioned or None)
    s.score(*[(f"s{i}", rng.random()) for i in range(size)])
    s.evict(threshold=rng.random())
    # A summary of about half of them (lost keys), the others kept (dropped referents).
    parents = [f"s{i}" for i in range(size) if rng.random() < 0.5]
    kept: list[dict[str, object]] = [
        {"span_id": f"s{i}"} for i in range(size) if f"s{i}" not in parents
    ]
    s.rewrite([*kept, {"span_id": "sum", "text": "a summary", "derived_from": parents}])
    s.evict(keep_top_k=rng.randint(0, size))
    return s


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.randoms(use_true_random=False), st.sampled_from([4, 12, 40]))
def test_a_mix_of_key_forms_emits_text_keys_alike_on_every_path(
    rng: random.Random, size: int
) -> None:
    # Bytes and str keys in one session: pins (bulk and per candidate), dropped
    # referents and lost keys all name them in text form, sorted as text.
    script = mixed_session(rng, size)
    indexed, _ = _replay(script, NEVER)
    bulk, _ = _replay(script, ALWAYS)
    assert indexed == bulk
    allowed = {CANONICAL, *OTHER_FORMS}
    for line in indexed:
        for found in re.findall(rb'"(hmac-sha256:[^"]*)"', line):
            text = found.decode()
            assert HASHED.fullmatch(text) or text in allowed, text
    lines = script.lines()
    assert run_split(lines, len(lines) // 2) == run_whole(lines)


def test_state_records_keep_keys_in_text_form() -> None:
    # The changelog's format is unchanged: records written before the engine held
    # digests load, and records written now read as they did.
    s = SessionScript()
    s.add("a", "opened", introduces=[{"key": "ACC-1", "type": "account"}])
    s.add("b", "again", introduces=[{"key": OTHER_FORMS[0], "type": "account"}])
    engine = Engine(track_changes=True)
    engine.process_many(s.events())
    records = engine.drain_changes()
    text = b"".join(value or b"" for _, value in records)
    assert re.search(rb"hmac-sha256:[0-9a-f]{64}", text)
    assert b"\\x" not in text and orjson.loads(records[-1][1] or b"null") is not None
    restored = Engine(track_changes=True)
    restored.restore([(k, v) for k, v in records if v is not None])
    again = restored.session(s.tenant, s.session_id)
    assert again is not None
    assert again.spans["a"].holds == engine.sessions[(s.tenant, s.session_id)].spans["a"].holds
    assert again.spans["b"].holds[0] == OTHER_FORMS[0]


def test_the_name_book_holds_digests_and_records_keep_text() -> None:
    # A name's entries, first words and key are held as digests; the header keeps their
    # text forms, as records of earlier versions do, and a restore holds the same book.
    s = SessionScript()
    s.add("a", "I'd suggest Warkworth House for the night.")
    s.add("b", "What is the phone number of warkworth house?")
    engine = Engine(track_changes=True)
    engine.process_many(s.events())
    book = engine.sessions[(s.tenant, s.session_id)].names
    assert book.entries and all(isinstance(entry, bytes) for entry in book.entries)
    assert all(isinstance(word, bytes) for word in book.firsts)
    key, _ = engine.sessions[(s.tenant, s.session_id)].spans["b"].holds
    assert any(value is not None and value[0] == key for value in book.entries.values())
    records = [(k, v) for k, v in engine.drain_changes() if v is not None]
    header = next(orjson.loads(v) for _, v in records if b'"names"' in v)
    assert all(HASHED.fullmatch(entry) for entry, _ in header["names"])
    assert all(HASHED.fullmatch(word) for word in header["name_firsts"])
    restored = Engine(track_changes=True)
    restored.restore(records)
    again = restored.sessions[(s.tenant, s.session_id)].names
    assert again.entries == book.entries and again.firsts == book.firsts


def test_emptying_the_caches_midway_changes_no_output() -> None:
    lines = simulate(SimConfig(sessions=12, seed=3)).lines
    whole, cleared = Engine(), Engine()
    source = Source("spanguard.events", 0, 0)
    expected = [o.model_dump() for line in lines for o in whole.process_raw(line, source)]
    got = []
    for number, line in enumerate(lines):
        if number % 50 == 0:
            cleared.clear_caches()
        got.extend(o.model_dump() for o in cleared.process_raw(line, source))
    assert got == expected
