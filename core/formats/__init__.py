"""Sessions of every agent, read-only, behind one interface (`SessionSource`).

* `core.formats.base`: the interface (`SessionSource`, `TranscriptMessage`,
  `image_marker`, `Forest`) -- read its docstring first;
* `core.formats.lines`: a JSONL file held as bytes + line spans, with catch-up and
  streamed ``.jsonl.zst`` reading (shared by the readers);
* `core.formats.claude` / `core.formats.codex`: the Claude Code and Codex readers;
* `core.formats.claude_dirs` / `core.formats.codex_dirs`: where each agent keeps its
  sessions and how to list them reading only the first KiB of each file;
* `core.formats.xcsh`: xcsh/pi session files on the same interface.

Nothing here writes, and nothing imports FUSE or trio.
"""

from __future__ import annotations

from core.formats.base import (
    AGENTS,
    AgentName,
    Forest,
    SessionSource,
    TranscriptMessage,
    image_marker,
)

__all__ = [
    "AGENTS",
    "AgentName",
    "Forest",
    "SessionSource",
    "TranscriptMessage",
    "image_marker",
]
