"""Sessions of every agent, read-only, behind one interface (`SessionSource`).

* `core.formats.base`: the interface (`SessionSource`, `TranscriptMessage`,
  `image_marker`, `Forest`) -- read its docstring first;
* `core.formats.lines`: a JSONL file held as bytes + line spans, with catch-up and
  streamed ``.jsonl.zst`` reading (shared by the readers);
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
