"""Session files shaped as core's context rules see them, built entry by entry:
`Chain`, and `a_long_session` (compactions, a branch with its summary, a label, state
changes, a custom message, odd values). The streamed renderings are checked against
the renderings in memory on them (tests/view/test_streamed_render.py,
tests/fs/test_huge_file.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

__all__ = ["LONG_TEXT", "PROBE", "Chain", "a_long_session", "turns"]

#: A tool output (~3.7 KB): most of a long session's bytes.
LONG_TEXT = "def handler(self, request: str) -> int:  # lorem ipsum dolor\n" * 60
#: A word in every prompt (``grep -c`` counts the prompts on the path).
PROBE = "quillwort"


class Chain:
    """Entries of one session file, each the child of the last unless told otherwise."""

    def __init__(self) -> None:
        self.lines: list[dict[str, Any]] = []
        self.last: str | None = None

    def add(self, kind: str, parent: object = "", **body: Any) -> str:
        entry_id = f"{len(self.lines):08x}"
        entry = {
            "type": kind,
            "id": entry_id,
            "parentId": self.last if parent == "" else parent,
            "timestamp": f"2026-01-01T00:{len(self.lines) // 60 % 60:02d}:00.000Z",
            **body,
        }
        self.lines.append(entry)
        self.last = entry_id
        return entry_id

    def message(self, role: str, **body: Any) -> str:
        return self.add("message", message={"role": role, **body})

    def write(self, path: Path, title: str | None = "A long one") -> Path:
        header: dict[str, Any] = {"type": "session", "version": 3, "id": "s1", "cwd": "/w"}
        header["timestamp"] = "2026-01-01T00:00:00.000Z"
        if title is not None:
            header["title"] = title
        path.parent.mkdir(parents=True, exist_ok=True)
        lines = [orjson.dumps(header), *(orjson.dumps(e) for e in self.lines)]
        path.write_bytes(b"\n".join(lines) + b"\n")
        return path


def turns(chain: Chain, count: int, start: int = 0) -> None:
    """Prompts, assistant turns with a tool call, tool results (a long output each)."""
    for i in range(start, start + count):
        chain.message("user", content=[{"type": "text", "text": f"prompt {i} {PROBE}"}])
        call = {"type": "toolCall", "id": f"call{i}", "name": "read", "arguments": {"p": i}}
        chain.message(
            "assistant",
            content=[{"type": "thinking", "thinking": "hm\n\nok"}, call],
            provider="anthropic",
            model=f"model-{i % 3}",
        )
        chain.message(
            "toolResult",
            toolCallId=f"call{i}",
            toolName="read",
            content=[{"type": "text", "text": f"{i} {LONG_TEXT}"}],
            isError=i % 7 == 0,
        )


def a_long_session(tmp_path: Path) -> Path:
    """Compactions, a branch with its summary, a label, state changes, a custom
    message, a message that is not a dict, a repeated id: what core's rules read."""
    chain = Chain()
    turns(chain, 30)
    chain.add("model_change", model="openai/gpt-5")
    chain.add("thinking_level_change", thinkingLevel="high")
    kept = chain.last
    turns(chain, 30, start=30)
    chain.add("compaction", summary="# Checkpoint\n\nso far", firstKeptEntryId=kept)
    turns(chain, 20, start=60)
    fork = chain.last
    turns(chain, 5, start=80)
    chain.add("branch_summary", parent=fork, fromId=fork, summary="Abandoned: that")
    chain.add("label", targetId=fork, label="here")
    chain.add("custom_message", customType="note", content="a note", display=True)
    chain.add("message", message="not a dict")
    chain.message("bashExecution", command="ls", output="a\nb", exitCode=2)
    turns(chain, 20, start=85)
    chain.add("compaction", summary="second", firstKeptEntryId=chain.lines[-9]["id"])
    turns(chain, 10, start=105)
    return chain.write(tmp_path / "long.jsonl")
