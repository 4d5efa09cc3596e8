"""Drop-in adapters for agent frameworks; each module imports its framework.

* :mod:`spanguard.streams.sdk.adapters.langchain`: LangChain 1.x middleware and a gated
  ``trim_messages``;
* :mod:`spanguard.streams.sdk.adapters.langgraph`: a LangGraph pre-model hook;
* :mod:`spanguard.streams.sdk.adapters.openai_chat`: OpenAI-style message lists and an
  OpenAI Agents SDK session.
"""
