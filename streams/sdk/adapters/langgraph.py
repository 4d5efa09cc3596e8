"""LangGraph: a pre-model hook that reports the graph's messages and gates compaction.

Three lines::

    hook = spanguard_pre_model_hook(session, compactor=my_summariser)
    graph.add_node("pre_model_hook", hook)          # or create_react_agent(pre_model_hook=hook)
    graph.add_edge("pre_model_hook", "agent")

``compactor`` takes the current messages and returns the compacted list (a
summary message followed by the messages it keeps, or a trimmed list); None
only reports. The hook runs before every model call: it reports new
messages (tool pairs from ``AIMessage.tool_calls`` / ``ToolMessage.tool_call_id``;
the ``SystemMessage`` and the first ``HumanMessage`` protected by default), and
when the compactor proposes a change, checks it (an empty or ballooning
summary, a rewritten protected message, a summary that absorbs half of a tool
pair are vetoed: the original messages stay), reports what the summary replaces
as merged into it, asks the gate to evict only what goes with no summary, keeps
what must stay (pinned, protected, both halves of a pair a trim would split) and
writes the result to the state; then the model call's ``turn`` starts. Faults go
to the state's ``spanguard_faults`` (see :class:`SpanguardMessagesState`) when the
graph's state has that key.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import Annotated, Any, Unpack

from langchain_core.messages import BaseMessage
from langgraph.graph import MessagesState

from spanguard.streams.sdk.adapters.langchain import fault_records, gate_messages
from spanguard.streams.sdk.adapters.lc_messages import to_messages
from spanguard.streams.sdk.bridge import AnySession, run_async, run_sync
from spanguard.streams.sdk.compaction import CompactionGuard, GuardOptions

Compactor = Callable[[list[BaseMessage]], Sequence[BaseMessage] | None]
FAULTS_KEY = "spanguard_faults"


class SpanguardMessagesState(MessagesState):
    """``MessagesState`` plus the faults spanguard found (accumulated)."""

    spanguard_faults: Annotated[list[dict[str, Any]], operator.add]


class SpanguardHook(CompactionGuard):
    """The pre-model hook: a callable node (sync graphs) with an async twin (``ahook``).

    ``faults_key``: the state key the faults go to (None: not written); the other
    options: :class:`~spanguard.streams.sdk.compaction.GuardOptions`.
    """

    def __init__(
        self,
        session: AnySession,
        compactor: Compactor | None = None,
        *,
        faults_key: str | None = FAULTS_KEY,
        **options: Unpack[GuardOptions],
    ) -> None:
        super().__init__(session, **options)
        self.compactor = compactor
        self.faults_key = faults_key

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
        """Report and gate, then start the model call's turn (the hook runs once per
        model call)."""
        try:
            return await self._report(messages, proposal)
        finally:
            self.next_turn()

    async def _report(
        self, messages: list[BaseMessage], proposal: Sequence[BaseMessage] | None
    ) -> dict[str, Any]:
        before = to_messages(messages, self.token_counter)
        if proposal is None:
            await self.session.observe(before)
            return {}
        name = getattr(self.compactor, "__name__", None)
        outcome, kept = await gate_messages(self, messages, before, list(proposal), name)
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
