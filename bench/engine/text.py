"""Span texts like an agent's context: identifiers, repeats and anaphors (deterministic)."""

from __future__ import annotations

import itertools
import random
from collections.abc import Sequence

USER_TEMPLATES = (
    "Customer on {account} says {order} was charged twice; can you check?",
    "Any update on {ticket}? The customer has been waiting since Monday.",
    "did that account clear KYC?",
    "Please refund the order and close the ticket when done.",
    "Why was {invoice} sent to the old billing address?",
    "Can you look at the errors in {path} for {order}?",
)
TOOL_TEMPLATES = (
    "lookup: {account} status=flagged risk=0.82, open {ticket}, last login 2026-11-02 09:14",
    "read_file: trace at {path}: 214 lines, ERROR at line 88 while handling {order}",
    "billing API: {invoice} total 129.90 EUR for {order}, shipped 2026-11-20",
    "search tickets: {ticket} (open, priority 2) and {ticket} (closed) on {account}",
    "kyc check: {account} verified by agent 12 on 2026-11-28, documents complete",
)
ASSISTANT_TEMPLATES = (
    "I checked that account; the ticket is still open and the order was refunded.",
    "Escalated {ticket} to billing; details are in the log at {path}.",
    "The invoice matches the order; nothing else is pending on this account.",
    "So far: {account} flagged, {ticket} open, refund for {order} pending.",
    "That ticket is a duplicate of {ticket}; I merged them.",
)
ENTITY_KINDS = ("account", "ticket", "order", "invoice", "path")


class TextGen:
    """Deterministic span texts with identifiers, repeats and anaphors.

    Each session has a growing pool of entities (accounts, tickets, orders,
    invoices, log paths); a placeholder names a fresh entity with probability
    ``fresh`` and otherwise repeats one already seen, so later spans mention
    what earlier spans introduced, as in a real support thread.
    """

    def __init__(self, rng: random.Random, fresh: float = 0.35, *, unique: bool = False) -> None:
        self.rng = rng
        self.fresh = fresh
        self.unique = unique
        """Every text ends with a serial number of its own (`` (#12)``, which the
        extractor does not read as an identifier): no two texts are equal, so no
        cache of scans helps."""
        self.pool: dict[str, list[str]] = {kind: [] for kind in ENTITY_KINDS}
        self._serial = itertools.count(1)
        self._texts = itertools.count(1)

    def new_entity(self, kind: str) -> str:
        """A phrase that introduces a never-seen identifier of ``kind``."""
        n = next(self._serial)
        phrase = {
            "account": f"account {4000 + n}-{'ABCDEFGH'[n % 8]}",
            "ticket": f"ticket INC-{4000 + n}",
            "order": f"order {50000 + n}",
            "invoice": f"invoice INV-{n:05d}",
            "path": f"/srv/agent/logs/worker-{n}.log",
        }[kind]
        self.pool[kind].append(phrase)
        return phrase

    def entity(self, kind: str) -> str:
        """A fresh or a repeated entity phrase of ``kind``."""
        pool = self.pool[kind]
        if not pool or self.rng.random() < self.fresh:
            return self.new_entity(kind)
        return self.rng.choice(pool)

    def text(self, templates: Sequence[str]) -> str:
        """One template, filled in."""
        text = self.rng.choice(templates).format_map(_Fill(self))
        return f"{text} (#{next(self._texts)})" if self.unique else text


class _Fill(dict[str, str]):
    """``format_map`` helper: every placeholder asks the generator for an entity."""

    def __init__(self, gen: TextGen) -> None:
        super().__init__()
        self.gen = gen

    def __missing__(self, key: str) -> str:
        return self.gen.entity(key)
