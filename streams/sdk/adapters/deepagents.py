"""LangChain deepagents: gate the summarisation deepagents runs inside ``wrap_model_call``.

Three lines (after making the summariser)::

    summarise = SummarizationMiddleware(model, backend=backend)  # deepagents' own
    guard = SpanguardDeepAgentsMiddleware(session, compactor=summarise)
    agent = create_deep_agent(model, tools, middleware=[guard])  # replaces deepagents' summariser
    result = agent.invoke({"messages": [...]})  # result["spanguard_faults"]

deepagents' ``SummarizationMiddleware`` compacts in ``wrap_model_call``: it hands the
model handler a request whose messages are a summary and the messages it keeps,
and records a ``_summarization_event`` in the state instead of rewriting the
messages. A ``before_model`` guard (:class:`~.langchain.SpanguardMiddleware`) never
sees that request. This guard wraps the compactor's ``wrap_model_call`` and
intercepts the request it passes to the handler: when its messages differ from the
state's (a summary, truncated tool arguments, clipped tool results), the change is
gated by :meth:`~spanguard.streams.sdk.compaction.CompactionGuard.gate` before the
model sees it:

* a vetoed compaction (an empty or ballooning summary, a rewritten protected
  message, a summary that absorbs half of a tool pair) sends the model the state's
  messages instead, and no ``_summarization_event`` is recorded. When the model then
  refuses those messages as too long (``ContextOverflowError``: the summary ran
  because of the context limit), the guard raises :class:`SpanguardFaultError` from
  it, which says the compaction was vetoed, instead of letting the overflow repeat;
* an applied compaction sends the model what the gate decided (what must stay is
  put back: pinned, protected, both halves of a tool pair) and writes exactly that
  into the state's ``messages`` (the event-based view cannot hold a message kept
  from before its cut; deepagents' offload file still holds the full history), with
  ``_summarization_event`` cleared.

Faults land in the state's ``spanguard_faults`` (so in ``invoke``'s result); kinds
in ``raise_on`` raise :class:`SpanguardFaultError` out of the agent. The guard
takes the compactor's ``name``, so ``create_deep_agent`` puts it in the place of
its default summariser; each model call advances the session's ``turn``. Any
middleware that compacts in ``wrap_model_call`` can be wrapped the same way.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Unpack

from deepagents.middleware.summarization import SUMMARIZATION_EVENT_KEY, SummarizationState
from langchain.agents.middleware.types import (
    AgentMiddleware,
    ExtendedModelResponse,
    ModelRequest,
    ModelResponse,
)
from langchain_core.exceptions import ContextOverflowError
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage
from langgraph.types import Command

from spanguard.streams.sdk.adapters.langchain import FAULTS_KEY, SpanguardState, fault_records
from spanguard.streams.sdk.adapters.lc_messages import (
    replace_all,
    to_message,
    to_messages,
    tool_partners,
)
from spanguard.streams.sdk.bridge import AnySession, run_async, run_sync
from spanguard.streams.sdk.compaction import CompactionGuard, CompactionOutcome, GuardOptions
from spanguard.streams.sdk.compaction import SpanguardFaultError as SpanguardFaultError
from spanguard.streams.sdk.messages import Message

SUMMARY_BLOCK = re.compile(r"<summary>\n(?P<summary>.*)\n</summary>\s*\Z", re.DOTALL)
"""The summary inside the message deepagents writes when it offloaded the history
(its preamble names the offload file; the span is the summariser's output)."""

CallResult = ModelResponse[Any] | AIMessage | ExtendedModelResponse[Any]


class SpanguardDeepAgentsState(SpanguardState, SummarizationState):
    """The agent state, spanguard's faults and the summariser's private keys (the guard
    stands in for the summariser, so the state must hold what it reads and writes)."""


def span(message: BaseMessage, guard: CompactionGuard) -> Message:
    """The SDK message of a LangChain message, a deepagents summary reported as the
    summary text alone (so an empty summary is an empty span)."""
    result = to_message(message, guard.token_counter)
    summary = message.additional_kwargs.get("lc_source") == "summarization"
    found = SUMMARY_BLOCK.search(result.text) if summary else None
    if found is None:
        return result
    text = found["summary"]
    tokens = guard.token_counter(text) if guard.token_counter is not None else None
    return replace(result, text=text, tokens=tokens)


def _same(a: Sequence[BaseMessage], b: Sequence[BaseMessage], guard: CompactionGuard) -> bool:
    """The two lists are one context: same spans, same texts, in order."""
    return [(m.id, m.text) for m in (span(x, guard) for x in a)] == [
        (m.id, m.text) for m in (span(x, guard) for x in b)
    ]


@dataclass
class _ModelCall:
    """One model call through the guard: what the state held, what the model got, the
    gated compactions and their faults."""

    guard: SpanguardDeepAgentsMiddleware
    current: list[AnyMessage]
    """What the session holds now (the state's messages, then each gated result)."""
    outcomes: list[CompactionOutcome] = field(default_factory=list)

    async def start(self) -> None:
        """Report the state's messages; the model call is a new turn."""
        await self.guard.session.observe([span(m, self.guard) for m in self.current])
        self.guard.next_turn()

    async def gate(self, request: ModelRequest[Any]) -> ModelRequest[Any]:
        """The request the model gets: ``request`` when it changes nothing, else the
        gated compaction's messages (the current ones when it is vetoed)."""
        proposed = list(request.messages)
        if _same(proposed, self.current, self.guard):
            return request
        before = [span(m, self.guard) for m in self.current]
        outcome = await self.guard.gate(
            before,
            [span(m, self.guard) for m in proposed],
            tool_partners(self.current),
            strategy=self.guard.compactor.name,
        )
        self.outcomes.append(outcome)
        self.guard.check_raise(outcome)
        if outcome.applied:
            by_id = {m.id: m for m in (*self.current, *proposed)}
            self.current = [by_id[m.id] for m in outcome.messages]
        return request.override(messages=list(self.current))

    def failed(self, error: Exception) -> None:
        """The model refused the request: when it refused a context spanguard kept by a
        veto as too long, raise :class:`SpanguardFaultError` from it (the compaction
        was needed; the agent must not retry the same context)."""
        vetoed = next((o for o in reversed(self.outcomes) if not o.applied), None)
        if vetoed is not None and isinstance(error, ContextOverflowError):
            note = f"{vetoed.note}, but the model refused them: context overflow ({error})"
            raise SpanguardFaultError(replace(vetoed, note=note), list(self.current)) from error

    async def finish(self, result: CallResult) -> CallResult:
        """Report the answer; when a compaction was gated, the state update: the messages
        the model got and its answer (applied), no summarisation event, the faults."""
        response, command = _split(result)
        await self.guard.session.observe(to_messages(response.result, self.guard.token_counter))
        if not self.outcomes:
            return result
        update = {
            k: v
            for k, v in _update(command).items()
            if k not in ("messages", SUMMARIZATION_EVENT_KEY, FAULTS_KEY)
        }
        # The summariser's event would rebuild its own view at the next call: the state
        # holds what was decided instead (a vetoed event must not come back either).
        update[SUMMARIZATION_EVENT_KEY] = None
        if any(o.applied for o in self.outcomes):
            # The model node appends the answer first; this update follows it, so the
            # answer is listed again after the decided context.
            update["messages"] = replace_all([*self.current, *response.result])
        faults = [record for o in self.outcomes for record in fault_records(o)]
        if faults:
            update[FAULTS_KEY] = faults
        return ExtendedModelResponse(model_response=response, command=Command(update=update))


def _split(result: CallResult) -> tuple[ModelResponse[Any], Command[Any] | None]:
    if isinstance(result, ExtendedModelResponse):
        return result.model_response, result.command
    if isinstance(result, AIMessage):
        return ModelResponse(result=[result]), None
    return result, None


def _update(command: Command[Any] | None) -> dict[str, Any]:
    update = command.update if command is not None else None
    return dict(update) if isinstance(update, dict) else {}


class SpanguardDeepAgentsMiddleware(
    AgentMiddleware[SpanguardDeepAgentsState, Any], CompactionGuard
):
    """Gates the compactions ``compactor`` makes in ``wrap_model_call`` (see the module).

    ``compactor``: deepagents' ``SummarizationMiddleware`` (or any middleware whose
    ``wrap_model_call`` changes the request's messages). Options:
    :class:`~spanguard.streams.sdk.compaction.GuardOptions`.
    """

    state_schema = SpanguardDeepAgentsState

    def __init__(
        self,
        session: AnySession,
        *,
        compactor: AgentMiddleware[Any, Any],
        **options: Unpack[GuardOptions],
    ) -> None:
        CompactionGuard.__init__(self, session, **options)
        self.compactor = compactor
        self.tools = list(getattr(compactor, "tools", []))

    @property
    def name(self) -> str:
        """The compactor's: ``create_deep_agent`` replaces its own summariser with a
        middleware of the same name, in place."""
        return self.compactor.name

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> CallResult:
        """Run the compactor with a handler that gates what it sends (sync agents)."""
        call = _ModelCall(self, list(request.messages))
        run_sync(self.session, call.start())

        def guarded(proposed: ModelRequest[Any]) -> ModelResponse[Any]:
            sent = run_sync(self.session, call.gate(proposed))
            try:
                return handler(sent)
            except Exception as error:
                call.failed(error)
                raise

        result = self.compactor.wrap_model_call(request, guarded)
        return run_sync(self.session, call.finish(result))

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> CallResult:
        """Run the compactor with a handler that gates what it sends (async agents)."""
        call = _ModelCall(self, list(request.messages))
        await run_async(self.session, call.start())

        async def guarded(proposed: ModelRequest[Any]) -> ModelResponse[Any]:
            sent = await run_async(self.session, call.gate(proposed))
            try:
                return await handler(sent)
            except Exception as error:
                call.failed(error)
                raise

        result = await self.compactor.awrap_model_call(request, guarded)
        return await run_async(self.session, call.finish(result))
