"""OpenAI-style lists: the OpenAI Agents SDK (a scripted Model, no API key) and a plain
Chat Completions message list, both guarded by spanguard.

    make demo                                # terminal 1: broker + worker
    .venv/bin/python examples/sdk_openai.py  # terminal 2 (or --offline)
"""

from __future__ import annotations

import uuid
from typing import Any

from agents import Agent, Runner, SQLiteSession, set_tracing_disabled
from agents.items import ModelResponse
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import ResponseOutputMessage, ResponseOutputText
from sdk_common import TURNS, make_client, parser, run

from spanguard.streams.sdk.adapters.openai_chat import ChatGuard, SpanguardAgentsSession, item_text


class ScriptedModel(Model):
    """Stands in for an OpenAI model: answers "Noted (n)."."""

    calls = 0

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        self.calls += 1
        text = ResponseOutputText(type="output_text", text=f"Noted ({self.calls}).", annotations=[])
        message = ResponseOutputMessage(
            type="message",
            id=f"msg_{self.calls}",
            role="assistant",
            status="completed",
            content=[text],
        )
        return ModelResponse(output=[message], usage=Usage(), response_id=f"r_{self.calls}")

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


def summarise(items: list[Any]) -> list[Any] | None:
    """Your compactor: a summary plus the last two items."""
    if len(items) < 10:
        return None
    return [{"role": "user", "content": "Summary: cats and weather."}, *items[-2:]]


async def main() -> None:
    args = parser(__doc__ or "").parse_args()
    set_tracing_disabled(True)
    client = await make_client(args)

    # 1. The OpenAI Agents SDK: wrap the session; the runner calls its compaction hook.
    guarded = client.session(f"oa-example-{uuid.uuid4().hex[:8]}")
    session = SpanguardAgentsSession(SQLiteSession(guarded.session_id), guarded, summarise)
    agent = Agent(name="support", model=ScriptedModel())
    for text in TURNS:
        await Runner.run(agent, text, session=session)
    for outcome in session.guard.outcomes:
        print(f"agents: compaction applied={outcome.applied} kept={list(outcome.kept)}")
    print("agents: items now:", [item_text(i)[:40] for i in await session.get_items()])

    # 2. A plain Chat Completions list.
    chat = client.session(f"chat-example-{uuid.uuid4().hex[:8]}")
    guard = ChatGuard(chat)
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are helpful."}]
    for text in TURNS:
        messages.append({"role": "user", "content": text})
        await guard.observe(messages)  # before each model call
        messages.append({"role": "assistant", "content": "Noted."})
    compacted = [messages[0], {"role": "user", "content": "Summary: cats."}, *messages[-2:]]
    messages, outcome = await guard.compact(messages, compacted)
    print(f"chat: applied={outcome.applied} kept because={dict(outcome.refused)}")
    print("chat: messages now:", [m["content"][:40] for m in messages])
    await guarded.close()
    await chat.close()
    await client.close()


if __name__ == "__main__":
    run(main())
