"""The other agents the mount knows: one `AgentFormat` per agent, registered here.

Adding an agent: write its connector module(s) in ``core/formats/`` -- a
`SessionSource` reader, where the agent keeps its directory and which files are
sessions (`AgentFormat.list_sessions`), a search `FileFormat` -- export one
`AgentFormat` record, and add it to `REGISTERED` below. Everything else (``agents/<name>/``,
``--agents``, ``--<name>-dir``, ``search/``, ``transcripts/``, ``sessionfs search``,
the render workers) reads this registry.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Final

from core.formats.agent_format import AgentFormat
from core.formats.claude_agent import CLAUDE_CODE
from core.formats.codex_agent import CODEX_CLI
from core.formats.copilot_agent import COPILOT_CLI
from core.formats.cursor_agent import CURSOR_AGENT
from core.formats.gemini_agent import GEMINI_CLI
from core.formats.opencode_agent import OPENCODE
from core.formats.qwen_agent import QWEN_CODE

__all__ = ["AGENT_FORMATS", "agent_format"]

#: One line per agent, in the order ``agents/`` lists them.
REGISTERED: Final[tuple[AgentFormat, ...]] = (
    CLAUDE_CODE,
    CODEX_CLI,
    COPILOT_CLI,
    OPENCODE,
    CURSOR_AGENT,
    GEMINI_CLI,
    QWEN_CODE,
)

#: name -> connector, in `REGISTERED` order
AGENT_FORMATS: Final = MappingProxyType({agent.name: agent for agent in REGISTERED})


def agent_format(name: str) -> AgentFormat:
    """The connector of the agent ``name``; `ValueError` for one not registered."""
    found = AGENT_FORMATS.get(name)
    if found is None:
        raise ValueError(f"no reader for {name!r} sessions (known: {', '.join(AGENT_FORMATS)})")
    return found
