"""LangGraph: a pre-model hook that reports the graph's messages and gates compaction.

Three lines::

    hook = spanguard_pre_model_hook(session, compactor=my_summariser)
    graph.add_node("pre_model_hook", hook)          # or create_react_agent(pre_model_hook=hook)
    graph.add_edge("pre_model_hook", "agent")

``compactor`` takes the current messages and returns the compacted list (a
summary message followed by the messages it keeps, or a trimmed list); None
only reports. The hook runs before every model call: it reports new
messages, and when the compactor proposes a change, checks it (an empty or
ballooning summary is vetoed: the original messages stay), asks the gate to
evict what it removes, keeps what the gate refuses and writes the result to
the state. Faults go to the state's ``spanguard_faults`` (see
:class:`SpanguardMessagesState`) when the graph's state has that key.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Collection, Sequence
from typing import Annotated, Any

from langchain_core.messages import BaseMessage
from langgraph.graph import MessagesState

from schemas import FaultKind
from streams.sdk.adapters.langchain import fault_records, gate_messages
from streams.sdk.adapters.lc_messages import to_messages
from streams.sdk.bridge import AnySession, run_async, run_sync, unwrap
from streams.sdk.compaction import DEFAULT_VETO, CompactionOutcome
from streams.sdk.messages import TokenCounter

Compactor = Callable[[list[BaseMessage]], Sequence[BaseMessage] | None]
FAULTS_KEY = "spanguard_faults"


class SpanguardMessagesState(MessagesState):
    """``MessagesState`` plus the faults spanguard found (accumulated)."""

    spanguard_faults: Annotated[list[dict[str, Any]], operator.add]


class SpanguardHook:
    """The pre-model hook: a callable node (sync graphs) with an async twin (``ahook``)."""

    def __init__(
        self,
        session: AnySession,
        compactor: Compactor | None = None,
        *,
        veto_on: Collection[FaultKind] = DEFAULT_VETO,
        carry_scores: bool = False,
        raise_on: Collection[FaultKind] = (),
        faults_key: str | None = FAULTS_KEY,
        token_counter: TokenCounter | None = None,
        timeout: float | None = None,
    ) -> None:
        self.session = unwrap(session)
        self.compactor = compactor
        self.veto_on = frozenset(veto_on)
        self.carry_scores = carry_scores
        self.raise_on = frozenset(raise_on)
        self.faults_key = faults_key
        self.token_counter = token_counter
        self.timeout = timeout
        self.outcomes: list[CompactionOutcome] = []
        """Every gated compaction, in order."""

    def __call__(self, state: dict[str, Any]) -> dict[str, Any]:
        """The node for sync graphs (``graph.invoke``)."""
        messages = list(state["messages"])
        proposal = self.compactor(messages) if self.compactor else None
        return run_sync(self.session, self._gate(messages, proposal))

    async def ahook(self, state: dict[str, Any]) -> dict[str, Any]:
        """The node for async graphs (``graph.ainvoke``)."""
        messages = list(state["messages"])
        proposal = self.compactor(messages) if self.compactor else None
        return await run_async(self.session, self._gate(messages, proposal))

    async def _gate(
        self, messages: list[BaseMessage], proposal: Sequence[BaseMessage] | None
    ) -> dict[str, Any]:
        before = to_messages(messages, self.token_counter)
        if proposal is None:
            await self.session.observe(before)
            return {}
        outcome, kept = await gate_messages(self, messages, before, list(proposal))
        update: dict[str, Any] = {}
        if outcome.faults and self.faults_key:
            update[self.faults_key] = fault_records(outcome)
        if kept is not None:
            update["messages"] = kept
        return update


def spanguard_pre_model_hook(
    session: AnySession,
    compactor: Compactor | None = None,
    **options: Any,
) -> SpanguardHook:
    """A pre-model hook for ``session`` (options: see :class:`SpanguardHook`)."""
    return SpanguardHook(session, compactor, **options)
