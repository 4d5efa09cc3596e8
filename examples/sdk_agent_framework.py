"""Microsoft Agent Framework agent guarded by spanguard (a scripted chat client: no API key).

    make demo                                         # terminal 1: broker + worker
    .venv/bin/python examples/sdk_agent_framework.py  # terminal 2 (or --offline)

The framework's SummarizationStrategy summarises the history at the last turn; its
summary drops the account that turn refers to ("that account"). SpanguardCompaction
wraps the strategy: the account's message is pinned and stays, the user's first
message (the task) is protected and stays verbatim.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Sequence
from typing import Any

from agent_framework import (
    Agent,
    BaseChatClient,
    ChatResponse,
    FunctionInvocationLayer,
    InMemoryHistoryProvider,
    Message,
    SummarizationStrategy,
)
from sdk_common import TURNS, make_client, parser, run

from spanguard.streams.sdk.adapters.agent_framework import SpanguardCompaction


class ScriptedClient(FunctionInvocationLayer[Any], BaseChatClient[Any]):
    """Stands in for a chat client (OpenAIChatClient...): answers ``answer``; keeps the
    last request it got (what the model would see)."""

    def __init__(self, answer: str | None = None) -> None:
        super().__init__()
        self.answer = answer
        self.calls = 0
        self.last: list[Message] = []

    def _inner_get_response(
        self, *, messages: Sequence[Message], stream: bool, options: Any, **kwargs: Any
    ) -> Awaitable[ChatResponse[Any]]:
        async def respond() -> ChatResponse[Any]:
            self.calls += 1
            self.last = list(messages)
            text = self.answer or f"Noted ({self.calls})."
            return ChatResponse(messages=[Message(role="assistant", contents=[text])])

        return respond()


async def main() -> None:
    args = parser(__doc__ or "").parse_args()
    client = await make_client(args)
    session = client.session(f"af-example-{uuid.uuid4().hex[:8]}")
    model = ScriptedClient()
    summariser = ScriptedClient("The user chatted about cats and the weather.")
    # Summarise at more than 8 included messages (the last turn's), keep about 2.
    strategy = SummarizationStrategy(client=summariser, target_count=2, threshold=6)

    # The three lines: wrap the strategy, give the guard to the agent, run.
    guard = SpanguardCompaction(session, strategy, trigger="threshold")
    agent = Agent(
        client=model,
        compaction_strategy=guard,
        context_providers=[InMemoryHistoryProvider(), guard],
    )
    thread = agent.create_session()
    for text in TURNS:
        await agent.run(text, session=thread)

    for outcome in guard.outcomes:
        print(f"compaction applied={outcome.applied} kept={list(outcome.kept)}")
        if outcome.vetoed_by:
            print(f"  vetoed: {outcome.note}")
        print(f"  kept because: {dict(outcome.refused)}")
    print("the model's last request:")
    for message in model.last:
        print(f"  {message.role:>9}: {message.text[:70]!r}")
    print(f"faults: {[f['kind'] for f in thread.state.get('spanguard_faults', [])]}")
    await session.close()
    await client.close()


if __name__ == "__main__":
    run(main())
