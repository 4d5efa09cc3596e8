"""Fixtures of the SDK tests: scripted chat models (no network) and the scenario every
framework test plays (the Kafka fixtures are tests/conftest.py's)."""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

SDK_DIR = Path(__file__).resolve().parent

# openhands-sdk needs Python 3.12: scripts/ci_openhands.sh runs that test in a 3.12 venv.
collect_ignore = [] if sys.version_info >= (3, 12) else ["test_openhands.py"]

# The turns of the scenario every framework test plays (seed 001): the account is
# introduced early, chatter follows, the last turn refers to it as "that account".
ACCOUNT_TURN = "My account 8841-C was charged twice for the same order."
CHATTER = [
    "Unrelated: what is a good name for a cat? " * 6,
    "And how warm will it be tomorrow in the city? " * 6,
    "Also, which book should I read on holiday? " * 6,
]
REFERRING_TURN = "Thanks. Please close that account today."


@pytest.fixture
def scripted_chat_model() -> Callable[[Sequence[Any]], Any]:
    """A LangChain chat model that answers from a script (AIMessages or strings).

    ``GenericFakeChatModel`` with ``bind_tools`` (agents bind their tools; the
    script decides the calls), so a real agent loop runs without a network.
    """
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel

    class ScriptedChatModel(GenericFakeChatModel):
        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

    def make(script: Sequence[Any]) -> Any:
        return ScriptedChatModel(messages=iter(list(script)))

    return make


@pytest.fixture
def scenario() -> dict[str, Any]:
    """The texts of the shared scenario."""
    return {"account": ACCOUNT_TURN, "chatter": CHATTER, "referring": REFERRING_TURN}


def _turns(chatter: int) -> list[str]:
    return [ACCOUNT_TURN, *CHATTER[:chatter], REFERRING_TURN]


# One thread of the agent or graph: its checkpointer keeps the state between turns.
THREAD: Any = {"configurable": {"thread_id": "t-1"}}


@pytest.fixture
def play() -> Callable[..., dict[str, Any]]:
    """Play the scenario's turns (``chatter``: how many chatter turns) on one thread of a
    LangChain agent or LangGraph graph (``invoke``); returns the last state."""
    from langchain_core.messages import HumanMessage

    def run(runnable: Any, *, chatter: int = len(CHATTER)) -> dict[str, Any]:
        state: dict[str, Any] = {}
        for text in _turns(chatter):
            state = runnable.invoke({"messages": [HumanMessage(text)]}, THREAD)
        return state

    return run


@pytest.fixture
def aplay() -> Callable[[Any], Awaitable[dict[str, Any]]]:
    """:func:`play` for async agents and graphs (``ainvoke``)."""
    from langchain_core.messages import HumanMessage

    async def run(runnable: Any) -> dict[str, Any]:
        state: dict[str, Any] = {}
        for text in _turns(len(CHATTER)):
            state = await runnable.ainvoke({"messages": [HumanMessage(text)]}, THREAD)
        return state

    return run


@pytest.fixture
def account_tool() -> Any:
    """The agents' one tool: looks the scenario's account up."""
    from langchain_core.tools import tool

    @tool
    def lookup_account(account: str) -> str:
        """Look an account up."""
        return f"Account {account}: two charges of 40 EUR for order 55012."

    return lookup_account


@pytest.fixture
def agent_script() -> Callable[[int], list[Any]]:
    """The model's answers for ``turns`` turns: a call of the account tool on the first
    turn, then plain replies."""
    from langchain_core.messages import AIMessage

    def script(turns: int) -> list[Any]:
        call = AIMessage(
            content="",
            tool_calls=[{"name": "lookup_account", "args": {"account": "8841-C"}, "id": "call-1"}],
        )
        return [call, *(AIMessage(content=f"Noted (turn {n}).") for n in range(turns + 1))]

    return script


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Kafka tests of this directory carry the ``kafka`` marker (the others need no broker)."""
    for item in items:
        if SDK_DIR in item.path.parents and "kafka_bootstrap" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.kafka)
