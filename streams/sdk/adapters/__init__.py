"""Drop-in adapters for agent frameworks; each module imports its framework.

* :mod:`spanguard.streams.sdk.adapters.langchain`: LangChain 1.x middleware and a gated
  ``trim_messages``;
* :mod:`spanguard.streams.sdk.adapters.deepagents`: LangChain deepagents' summarisation
  inside ``wrap_model_call``;
* :mod:`spanguard.streams.sdk.adapters.langgraph`: a LangGraph pre-model hook;
* :mod:`spanguard.streams.sdk.adapters.openai_chat`: OpenAI-style message lists and an
  OpenAI Agents SDK session;
* :mod:`spanguard.streams.sdk.adapters.adk`: a Google ADK events summarizer and plugin;
* :mod:`spanguard.streams.sdk.adapters.agent_framework`: a Microsoft Agent Framework
  compaction strategy;
* :mod:`spanguard.streams.sdk.adapters.pydantic_ai`: a Pydantic AI capability around history
  processing and the harness's compaction strategies;
* :mod:`spanguard.streams.sdk.adapters.openhands`: an OpenHands condenser (Python 3.12+).

Shared pieces: :mod:`~spanguard.streams.sdk.adapters.lc_messages` (LangChain messages) and
:mod:`~spanguard.streams.sdk.adapters.items` (ADK, Agent Framework, Pydantic AI).
"""
