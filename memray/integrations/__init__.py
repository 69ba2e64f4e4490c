"""Drop-in memory for the agent frameworks users already run.

One module per framework, each behind a pip extra and imported only when asked for (``import
memray`` imports none of them); importing one without its framework raises
:class:`~memray.errors.MissingExtraError` naming the extra to install:

==============================  =====================  ============================================
module                          extra                  what it plugs in
==============================  =====================  ============================================
:mod:`memray.integrations.adk`            ``[adk]``        ``MemrayMemoryService``: Google ADK's ``BaseMemoryService``
:mod:`memray.integrations.langgraph`      ``[langgraph]``  ``MemrayStore``: LangGraph's ``BaseStore``
:mod:`memray.integrations.openai_agents`  ``[agents]``     ``MemraySession``: the OpenAI Agents SDK's ``Session``
==============================  =====================  ============================================

Each wraps an open :class:`memray.Memory` (either mode) and goes through its public handles.
"""

__all__: list[str] = []
