"""Google ADK agent guarded by spanguard (a scripted LLM: no API key).

    make demo                               # terminal 1: broker + worker
    .venv/bin/python examples/sdk_adk.py    # terminal 2 (or --offline)

ADK's token-threshold compaction runs after the last turn and its LlmEventSummarizer
would summarise the account that turn refers to ("that account") away.
SpanguardSummarizer wraps the summarizer (and watches the session as a plugin): the
account's turn is pinned and stays, the user's first message (the task) is protected
and stays verbatim; only the chatter between them goes into the summary.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncGenerator

from google.adk.agents import LlmAgent
from google.adk.apps.app import App, EventsCompactionConfig
from google.adk.apps.llm_event_summarizer import LlmEventSummarizer
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService
from google.genai import types
from sdk_common import TURNS, make_client, parser, run

from spanguard.streams.sdk.adapters.adk import SpanguardSummarizer, context_events, event_span


class ScriptedLlm(BaseLlm):
    """Stands in for Gemini: answers ``answer``, and reports 100 prompt tokens per
    message it gets (ADK's token threshold reads the model's own count)."""

    model: str = "scripted"
    answer: str = "Noted."

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        usage = types.GenerateContentResponseUsageMetadata(
            prompt_token_count=100 * len(llm_request.contents)
        )
        content = types.Content(role="model", parts=[types.Part(text=self.answer)])
        yield LlmResponse(content=content, usage_metadata=usage)


async def main() -> None:
    args = parser(__doc__ or "").parse_args()
    client = await make_client(args)
    session = client.session(f"adk-example-{uuid.uuid4().hex[:8]}")
    summarizer = LlmEventSummarizer(llm=ScriptedLlm(answer="The user chatted about cats."))
    agent = LlmAgent(name="support", model=ScriptedLlm())

    # The three lines: wrap the summarizer, give the guard to the app twice (it is also
    # the plugin that watches the session), run. The last turn's request holds 9
    # messages (900 tokens): compaction after it, keeping that turn and its answer.
    guard = SpanguardSummarizer(session, summarizer, trigger="threshold")
    config = EventsCompactionConfig(summarizer=guard, token_threshold=900, event_retention_size=2)
    app = App(name="support", root_agent=agent, plugins=[guard], events_compaction_config=config)

    service = InMemorySessionService()
    adk_session = await service.create_session(app_name="support", user_id="u1")
    runner = Runner(app=app, session_service=service)
    for text in TURNS:
        message = types.Content(role="user", parts=[types.Part(text=text)])
        async for _ in runner.run_async(
            user_id="u1", session_id=adk_session.id, new_message=message
        ):
            pass

    for outcome in guard.outcomes:
        print(f"compaction applied={outcome.applied} kept={list(outcome.kept)}")
        if outcome.vetoed_by:
            print(f"  vetoed: {outcome.note}")
        print(f"  kept because: {dict(outcome.refused)}")
    final = await service.get_session(app_name="support", user_id="u1", session_id=adk_session.id)
    assert final is not None
    print("context now (the session's events, compaction applied):")
    for event in context_events(final.events):
        span = event_span(event)
        print(f"  {span.role:>9}: {span.text[:70]!r}")
    print(f"pinned: {list(guard.outcomes[-1].pinned) if guard.outcomes else []}")
    print(f"faults: {[f['kind'] for f in final.state.get('spanguard_faults', [])]}")
    await session.close()
    await client.close()


if __name__ == "__main__":
    run(main())
