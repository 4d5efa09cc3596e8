"""LangGraph agent loop with spanguard's pre-model hook (scripted model, no API key).

    make demo                                   # terminal 1: broker + worker
    .venv/bin/python examples/sdk_langgraph.py  # terminal 2 (or --offline)

The compactor summarises all but the last two messages; its summary drops the
account the last turn refers to, and spanguard keeps that message (pinned), and
the user's first message (protected by default).
"""

from __future__ import annotations

import uuid
from typing import Any

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from sdk_common import make_client, parser, play, report, run

from spanguard.streams.sdk.adapters.langgraph import (
    SpanguardMessagesState,
    spanguard_pre_model_hook,
)


def summarise(messages: list[BaseMessage]) -> list[BaseMessage] | None:
    """The graph's own compactor: a summary plus the last two messages."""
    if len(messages) < 9:
        return None
    return [HumanMessage("Summary: the user chatted about cats and weather."), *messages[-2:]]


async def main() -> None:
    args = parser(__doc__ or "").parse_args()
    client = await make_client(args)
    session = client.session(f"lg-example-{uuid.uuid4().hex[:8]}")
    model = GenericFakeChatModel(messages=iter([AIMessage(f"Noted ({n}).") for n in range(10)]))

    async def agent(state: SpanguardMessagesState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    # The three lines: make the hook, add it as a node, run it before the model.
    hook = spanguard_pre_model_hook(session, summarise)
    graph = StateGraph(SpanguardMessagesState)
    graph.add_node("pre_model_hook", hook.ahook)
    graph.add_node("agent", agent)
    graph.add_edge(START, "pre_model_hook")
    graph.add_edge("pre_model_hook", "agent")
    graph.add_edge("agent", END)
    compiled = graph.compile(checkpointer=InMemorySaver())

    report(hook.outcomes, await play(compiled, session.session_id))
    await session.close()
    await client.close()


if __name__ == "__main__":
    run(main())
