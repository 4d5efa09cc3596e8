"""LangChain 1.x: a middleware that reports every model call and gates compaction.

Three lines::

    guard = SpanguardMiddleware(session, compactor=SummarizationMiddleware(model, ...))
    agent = create_agent(model, tools, middleware=[guard])
    result = agent.invoke({"messages": [...]})   # result["spanguard_faults"]

``compactor`` is any middleware whose ``before_model`` rewrites the messages
(LangChain's ``SummarizationMiddleware``, your own): the guard calls it,
checks its proposal before it is applied (an empty or ballooning summary, a
rewritten protected message, a summary that absorbs half of a tool pair are
vetoed and the original messages stay), reports what the summary replaces as
merged into it and asks the gate to evict only what it drops with no summary,
puts back what must stay (pinned: a later turn refers to it; protected; half of
a tool pair) and reports the result. Each model call advances the session's
``turn``. Tool pairs come from
``AIMessage.tool_calls`` and ``ToolMessage.tool_call_id``; a ``SystemMessage``
and the first ``HumanMessage`` in the state are protected by default (the
``system_prompt`` given to ``create_agent`` is not in the state: no compactor
can touch it). Faults land in the agent state's ``spanguard_faults``
(so in ``invoke``'s result); kinds in ``raise_on`` raise
:class:`SpanguardFaultError` out of the agent instead.

:func:`guarded_trim_messages` wraps ``langchain_core``'s ``trim_messages`` the same way.
"""

from __future__ import annotations

import operator
from collections.abc import Awaitable, Callable, Collection, Sequence
from typing import Annotated, Any, NotRequired, Unpack

from langchain.agents.middleware.types import (
    AgentMiddleware,
    AgentState,
    ModelRequest,
    ModelResponse,
)
from langchain_core.messages import BaseMessage, trim_messages
from langgraph.runtime import Runtime

from spanguard.schemas import FaultKind
from spanguard.streams.sdk.adapters.lc_messages import (
    apply_update,
    replace_all,
    to_messages,
    tool_partners,
)
from spanguard.streams.sdk.bridge import AnySession, run_async, run_sync, unwrap
from spanguard.streams.sdk.compaction import (
    DEFAULT_VETO,
    CompactionGuard,
    CompactionOutcome,
    GuardOptions,
)
from spanguard.streams.sdk.compaction import (
    SpanguardFaultError as SpanguardFaultError,
)  # re-exported
from spanguard.streams.sdk.messages import Message

FAULTS_KEY = "spanguard_faults"


class SpanguardState(AgentState[Any]):
    """The agent state plus the faults spanguard found (accumulated over the run)."""

    spanguard_faults: NotRequired[Annotated[list[dict[str, Any]], operator.add]]


def fault_records(outcome: CompactionOutcome) -> list[dict[str, Any]]:
    """The outcome's faults as JSON-ready dicts (hashes and ids only, never text)."""
    return [f.model_dump(mode="json") for f in outcome.faults]


Proposal = dict[str, Any] | None


async def gate_messages(
    guard: CompactionGuard,
    messages: Sequence[BaseMessage],
    before: list[Message],
    proposed: Sequence[BaseMessage],
    strategy: str | None = None,
) -> tuple[CompactionOutcome, list[BaseMessage] | None]:
    """Gate a compaction of LangChain messages (shared by the LangChain middleware and
    the LangGraph hook): the outcome, recorded and raised on as the guard says, and
    the messages to write back when the compaction is applied (None: keep ``messages``).
    ``strategy`` names the compactor in the rewrite (when the guard was given none)."""
    outcome = await guard.gate(
        before,
        to_messages(proposed, guard.token_counter),
        tool_partners(messages),
        strategy=strategy,
    )
    guard.check_raise(outcome)
    if not outcome.applied:
        return outcome, None
    by_id = {m.id: m for m in (*messages, *proposed)}
    return outcome, replace_all([by_id[m.id] for m in outcome.messages])


class SpanguardMiddleware(AgentMiddleware[SpanguardState, Any], CompactionGuard):
    """Reports every model call's messages; gates ``compactor``'s rewrites (see the module).

    Options: :class:`~spanguard.streams.sdk.compaction.GuardOptions`.
    """

    state_schema = SpanguardState

    def __init__(
        self,
        session: AnySession,
        *,
        compactor: AgentMiddleware[Any, Any] | None = None,
        **options: Unpack[GuardOptions],
    ) -> None:
        CompactionGuard.__init__(self, session, **options)
        self.compactor = compactor
        if compactor is not None:
            self.tools = list(getattr(compactor, "tools", []))

    @property
    def name(self) -> str:
        """Unique per wrapped compactor, so several guards can share an agent."""
        inner = f"[{self.compactor.name}]" if self.compactor is not None else ""
        return f"SpanguardMiddleware{inner}"

    # -- compaction ------------------------------------------------------------

    def before_model(self, state: SpanguardState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Run the compactor and gate its proposal (sync agents)."""
        proposal = self.compactor.before_model(state, runtime) if self.compactor else None
        return run_sync(self.session, self._gate(state["messages"], proposal))

    async def abefore_model(
        self, state: SpanguardState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Run the compactor and gate its proposal (async agents)."""
        proposal = await self.compactor.abefore_model(state, runtime) if self.compactor else None
        return await run_async(self.session, self._gate(state["messages"], proposal))

    async def _gate(
        self, messages: Sequence[BaseMessage], proposal: Proposal
    ) -> dict[str, Any] | None:
        before = to_messages(messages, self.token_counter)
        if not proposal or "messages" not in proposal:
            await self.session.observe(before)
            return proposal
        proposed = apply_update(messages, proposal["messages"])
        name = self.compactor.name if self.compactor is not None else None
        outcome, kept = await gate_messages(self, messages, before, proposed, name)
        update = {k: v for k, v in proposal.items() if k != "messages"}
        if outcome.faults:
            update[FAULTS_KEY] = fault_records(outcome)
        if kept is not None:
            update["messages"] = kept
        return update or None

    # -- reporting every model call ----------------------------------------------

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResponse[Any]:
        """Report the messages the model is called with (a new turn), then its answer
        (sync agents)."""
        run_sync(self.session, self.session.observe(to_messages(request.messages)))
        self.next_turn()
        response = handler(request)
        run_sync(self.session, self.session.observe(_answer(response)))
        return response

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any]:
        """Report the messages the model is called with (a new turn), then its answer
        (async agents)."""
        await run_async(self.session, self.session.observe(to_messages(request.messages)))
        self.next_turn()
        response = await handler(request)
        await run_async(self.session, self.session.observe(_answer(response)))
        return response


def _answer(response: ModelResponse[Any]) -> list[Message]:
    # The answer's ids are set here, on the message objects the agent puts in its state.
    return to_messages(getattr(response, "result", None) or [])


def guarded_trim_messages(
    session: AnySession, messages: Sequence[BaseMessage], **options: Any
) -> tuple[list[BaseMessage], CompactionOutcome]:
    """``trim_messages(messages, **trim_options)``, gated: messages the gate refuses to
    evict stay (in their place); returns the messages to use and the outcome.

    ``options``: those of :func:`aguarded_trim_messages`. Call from sync code; for
    async code use :func:`aguarded_trim_messages`.
    """
    async_session = unwrap(session)
    return run_sync(async_session, aguarded_trim_messages(async_session, messages, **options))


async def aguarded_trim_messages(
    session: AnySession,
    messages: Sequence[BaseMessage],
    *,
    veto_on: Collection[FaultKind] = DEFAULT_VETO,
    carry_scores: bool = False,
    raise_on: Collection[FaultKind] = (),
    timeout: float | None = None,
    trigger: str | None = None,
    **trim_options: Any,
) -> tuple[list[BaseMessage], CompactionOutcome]:
    """Async :func:`guarded_trim_messages`: the gate's options (see
    :class:`~spanguard.streams.sdk.compaction.GuardOptions`; ``token_counter`` is
    ``trim_messages``'s), the rest for ``trim_messages``.

    A trim that cuts between a tool call and its result keeps both; one that drops
    a protected message (the system prompt, the user's first message) keeps it."""
    guard = CompactionGuard(
        session,
        veto_on=veto_on,
        carry_scores=carry_scores,
        raise_on=raise_on,
        timeout=timeout,
        strategy="trim_messages",
        trigger=trigger,
    )
    before = to_messages(messages)  # first: it gives the messages their span ids
    trimmed = trim_messages(list(messages), **trim_options)
    outcome = await guard.gate(before, to_messages(trimmed), tool_partners(messages))
    guard.check_raise(outcome)
    if not outcome.applied:
        return list(messages), outcome
    by_id = {m.id: m for m in (*messages, *trimmed)}
    return [by_id[m.id] for m in outcome.messages if m.id in by_id], outcome
