"""Sessions of every agent, read-only, behind one interface (`SessionSource`).

* `core.formats.base`: the interface (`SessionSource`, `TranscriptMessage`,
  `image_marker`, `Forest`) -- read its docstring first;
* `core.formats.lines`: a JSONL file held as bytes + line spans, with catch-up and
  streamed ``.jsonl.zst`` reading (shared by the readers);
* `core.formats.claude`: Claude Code sessions (`ClaudeSession`); their turns
  (``context.json``, ``transcript.md``) in `core.formats.claude_turns`, their blocks in
  the xcsh shape in `core.formats.claude_blocks`;
* `core.formats.codex`: Codex rollouts (`CodexSession`), their response items in the
  xcsh shape in `core.formats.codex_items`;
* `core.formats.xcsh`: xcsh/pi session files (`XcshSession`) over their compact index
  (`core.formats.xcsh_file`: file bytes + per-entry spans), with core's own context,
  tree and stats rules; `core.formats.xcsh_parsed.ManagerSource` reads a session held
  parsed (a `SessionManager`, for writes and older format versions) the same way;
* `core.formats.claude_dirs` / `core.formats.codex_dirs`: where each agent keeps its
  sessions and how a listing finds them (sub-agents, archives, titles) reading at most
  the first KiB of each file (`core.formats.prefix`);
* `core.formats.gemini` (`GeminiSession`, `GeminiDocumentSession`): Gemini CLI chats,
  read by the rules of Gemini's own loader (`core.formats.gemini_messages`), found by
  `core.formats.gemini_dirs`, searched by `core.formats.gemini_search`;
* `core.formats.qwen` (`QwenSession`): Qwen Code sessions (a ``parentUuid`` chain of
  Gemini-shaped messages);
* `core.formats.registry`: every other agent the mount shows, one `AgentFormat`
  connector each (`core.formats.agent_format`: name, directory, listing, reader,
  search): `core.formats.claude_agent`, `codex_agent`, `gemini_agent`, `qwen_agent`;
Nothing here writes, and nothing imports FUSE or trio.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.formats import base
from core.lazy_exports import lazy_exports

#: Where each name lives, imported at its first use (`core.lazy_exports`): a process
#: reading xcsh files only does not import every agent's reader. (The interface,
#: `core.formats.base`, is what every reader imports first anyway.)
MODULES = {
    "core.formats.base": tuple(base.__all__),
    "core.formats.claude": ("ClaudeSession",),
    "core.formats.codex": ("CodexSession",),
    "core.formats.xcsh": ("XcshSession",),
}

if TYPE_CHECKING:
    from core.formats.base import (
        AGENTS,
        AgentName,
        Forest,
        SessionSource,
        TranscriptMessage,
        image_marker,
    )
    from core.formats.claude import ClaudeSession
    from core.formats.codex import CodexSession
    from core.formats.xcsh import XcshSession
else:
    __getattr__, __dir__ = lazy_exports(__name__, MODULES)

__all__ = [
    "AGENTS",
    "AgentName",
    "ClaudeSession",
    "CodexSession",
    "Forest",
    "SessionSource",
    "TranscriptMessage",
    "XcshSession",
    "image_marker",
]
