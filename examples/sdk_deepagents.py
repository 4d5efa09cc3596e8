"""A LangChain deep agent guarded by spanguard (scripted model: runs without an API key).

    make demo                                   # terminal 1: broker + worker
    .venv/bin/python examples/sdk_deepagents.py # terminal 2 (or --offline)

deepagents' SummarizationMiddleware compacts inside wrap_model_call: its summary
drops the account the last turn refers to ("that account"). The guard takes the
summariser's place in create_deep_agent, pins that message and the model gets it;
the agent's state holds what the model saw. The user's first message (the task) is
protected by default: it stays verbatim, ahead of the summary. An empty or
ballooning summary, or one that split a tool pair, would be vetoed (docs/sdk.md).
"""

from __future__ import annotations

import uuid
from typing import Any

from deepagents import create_deep_agent
from deepagents.backends import StateBackend
from deepagents.middleware.summarization import SummarizationMiddleware
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langgraph.checkpoint.memory import InMemorySaver
from sdk_common import make_client, parser, play, report, run

from spanguard.streams.sdk.adapters.deepagents import SpanguardDeepAgentsMiddleware


class ScriptedModel(GenericFakeChatModel):
    """Stands in for a real chat model (swap in ChatAnthropic, ChatOpenAI...)."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self


async def main() -> None:
    args = parser(__doc__ or "").parse_args()
    client = await make_client(args)
    session = client.session(f"da-example-{uuid.uuid4().hex[:8]}")
    model = ScriptedModel(messages=iter([AIMessage(f"Noted ({n}).") for n in range(10)]))
    summarise = SummarizationMiddleware(
        model,
        backend=StateBackend(),
        trigger=("messages", 9),
        keep=("messages", 2),
        summarizer=lambda messages: "The user chatted about cats and the weather.",
    )
    # The three lines: wrap the summariser, give the guard to the deep agent (it takes
    # the default summariser's place: same name), run.
    guard = SpanguardDeepAgentsMiddleware(session, compactor=summarise, trigger="threshold")
    agent = create_deep_agent(model, [], middleware=[guard], checkpointer=InMemorySaver())
    report(guard.outcomes, await play(agent, session.session_id))
    await session.close()
    await client.close()


if __name__ == "__main__":
    run(main())
