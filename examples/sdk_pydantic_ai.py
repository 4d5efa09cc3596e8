"""Pydantic AI agent guarded by spanguard (a scripted FunctionModel: no API key).

    make demo                                     # terminal 1: broker + worker
    .venv/bin/python examples/sdk_pydantic_ai.py  # terminal 2 (or --offline)

A history processor summarises all but the last two messages at the last turn; its
summary drops the account that turn refers to ("that account"). SpanguardHistory runs
the processor and gates it: the account's message is pinned and stays, the user's
first message (the task) is protected and stays verbatim.
"""

from __future__ import annotations

import uuid

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from sdk_common import TURNS, make_client, parser, run

from spanguard.streams.sdk.adapters.pydantic_ai import (
    SpanguardHistory,
    message_span,
    spanguard_faults,
)


def summarise(messages: list[ModelMessage]) -> list[ModelMessage]:
    """Your history processor: from 9 messages on, a summary and the last two."""
    if len(messages) < 9:
        return messages
    summary = ModelRequest(parts=[UserPromptPart("The user chatted about cats and the weather.")])
    return [summary, *messages[-2:]]


async def main() -> None:
    args = parser(__doc__ or "").parse_args()
    client = await make_client(args)
    session = client.session(f"pai-example-{uuid.uuid4().hex[:8]}")
    seen: list[list[ModelMessage]] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        """Stands in for a real model: answers "Noted (n)."."""
        seen.append(list(messages))
        return ModelResponse(parts=[TextPart(f"Noted ({len(seen)}).")])

    # The three lines: the guard runs your processor, give it to the agent, run.
    guard = SpanguardHistory(session, summarise, trigger="threshold")
    agent = Agent(FunctionModel(model), capabilities=[guard])
    history: list[ModelMessage] = []
    for text in TURNS:
        history = (await agent.run(text, message_history=history)).all_messages()

    for outcome in guard.outcomes:
        print(f"compaction applied={outcome.applied} kept={list(outcome.kept)}")
        if outcome.vetoed_by:
            print(f"  vetoed: {outcome.note}")
        print(f"  kept because: {dict(outcome.refused)}")
    print("the model's last request:")
    for message in seen[-1]:  # Pydantic AI merges consecutive requests into one
        span = message_span(message)
        for line in span.text.splitlines():
            print(f"  {span.role:>9}: {line[:70]!r}")
    print(f"faults: {[f['kind'] for f in spanguard_faults(history)]}")
    await session.close()
    await client.close()


if __name__ == "__main__":
    run(main())
