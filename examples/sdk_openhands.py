"""An OpenHands agent guarded by spanguard (scripted LLMs: runs without an API key).

openhands-sdk needs Python 3.12 (scripts/ci_openhands.sh makes .venv-openhands):

    make demo                                              # terminal 1: broker + worker
    .venv-openhands/bin/python examples/sdk_openhands.py   # terminal 2 (or --offline)

OpenHands' LLMSummarizingCondenser forgets the account the last turn refers to
("that account") and the lookup that found it; spanguard pins them and the
Condensation the agent records forgets only the rest. The user's first message (the
task) and the system prompt are protected by default. An empty or ballooning summary,
or one that split a tool call from its observation, would be vetoed (docs/sdk.md).
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import uuid
from dataclasses import dataclass

# No network: litellm's model price map from its own package; no banner.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("OPENHANDS_SUPPRESS_BANNER", "1")

from openhands.sdk import Agent, LocalConversation
from openhands.sdk.context.condenser import LLMSummarizingCondenser
from openhands.sdk.context.view import View
from openhands.sdk.llm import Message, MessageToolCall, TextContent
from openhands.sdk.testing import TestLLM
from sdk_common import TURNS, make_client, parser, report, run

from spanguard.streams.sdk.adapters.openhands import SpanguardCondenser, event_message


def say(text: str) -> Message:
    """An assistant answer of the scripted LLM."""
    return Message(role="assistant", content=[TextContent(text=text)])


LOOKUP = Message(
    role="assistant",
    content=[TextContent(text="Looking it up.")],
    tool_calls=[
        MessageToolCall(
            id="call-1",
            name="think",
            arguments='{"thought": "Account 8841-C: two charges of 40 EUR for order 55012."}',
            origin="completion",
        )
    ],
)


@dataclass(frozen=True)
class Line:
    """An event as ``report`` prints a message (its role and text)."""

    type: str
    text: str


async def main() -> None:
    args = parser(__doc__ or "").parse_args()
    client = await make_client(args)
    session = client.session(f"oh-example-{uuid.uuid4().hex[:8]}")
    # Stand in for real LLMs (LLM(model="anthropic/...", api_key=...)).
    llm = TestLLM.from_messages(
        [say("Noted (0)."), LOOKUP, *(say(f"Noted ({n}).") for n in range(1, 6))]
    )
    summary_llm = TestLLM.from_messages(
        [say("The user chatted about cats and the weather.")], usage_id="condenser"
    )
    # The three lines: wrap the condenser, give it to the agent, run the conversation.
    condenser = SpanguardCondenser(
        session, LLMSummarizingCondenser(llm=summary_llm, max_size=11, keep_first=2)
    )
    agent = Agent(llm=llm, tools=[], condenser=condenser)
    conversation = LocalConversation(agent=agent, workspace=tempfile.mkdtemp(), visualizer=None)
    for text in TURNS:
        # openhands types the parameters of its @observe-decorated methods as Never.
        conversation.send_message(text)  # type: ignore[arg-type]
        # The conversation runs its agent synchronously: off this event loop, which a
        # Kafka session's sends belong to.
        await asyncio.to_thread(conversation.run)
    view = View.from_events(conversation.state.events)
    lines = [
        Line(m.role or "", m.text) for m in (event_message(e, condenser.guard) for e in view.events)
    ]
    faults = [f.model_dump(mode="json") for f in condenser.faults]
    report(condenser.outcomes, {"messages": lines[1:], "spanguard_faults": faults})
    await session.close()
    await client.close()


if __name__ == "__main__":
    run(main())
