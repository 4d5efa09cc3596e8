"""LangChain 1.x agent guarded by spanguard (scripted model: runs without an API key).

    make demo                                  # terminal 1: broker + worker
    .venv/bin/python examples/sdk_langchain.py # terminal 2 (or --offline)

The agent's SummarizationMiddleware writes a summary that drops the account the
last turn refers to ("that account"); spanguard pins that message and it stays.
The user's first message (the task) is protected by default: it stays verbatim,
ahead of the summary. A summary that absorbed a tool call without its result, or
rewrote a protected message, would be vetoed (see docs/sdk.md).
"""

from __future__ import annotations

import uuid
from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware import SummarizationMiddleware
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langgraph.checkpoint.memory import InMemorySaver
from sdk_common import make_client, parser, play, report, run

from spanguard.streams.sdk.adapters.langchain import SpanguardMiddleware


class ScriptedModel(GenericFakeChatModel):
    """Stands in for a real chat model (swap in ChatOpenAI, ChatAnthropic...)."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self


async def main() -> None:
    args = parser(__doc__ or "").parse_args()
    client = await make_client(args)
    session = client.session(f"lc-example-{uuid.uuid4().hex[:8]}")
    model = ScriptedModel(messages=iter([AIMessage(f"Noted ({n}).") for n in range(10)]))
    summarise = SummarizationMiddleware(
        model,
        trigger=("messages", 9),
        keep=("messages", 2),
        summarizer=lambda messages: "The user chatted about cats and the weather.",
    )
    # The three lines: wrap the compactor, give the middleware to the agent, run.
    guard = SpanguardMiddleware(session, compactor=summarise, trigger="threshold")
    agent = create_agent(model, [], middleware=[guard], checkpointer=InMemorySaver())
    report(guard.outcomes, await play(agent, session.session_id))
    await session.close()
    await client.close()


if __name__ == "__main__":
    run(main())
