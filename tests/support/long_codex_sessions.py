"""A Codex rollout shaped as long ones are, built line by line with the demo's line
makers (``contrib/demo_agents.py``): `a_long_codex_session`.

What `core.formats.codex.CodexSession` reads for the context and transcript is all
there: prompts, reasoning, calls and their outputs (one output before its call's
line is read: it stays where it is), injected context, a compaction with a replacement
history (and the reply that wrote its summary just before it), an older compaction
with only a summary, a rollback of two user turns, model changes, junk. The streamed
renderings are checked against the renderings in memory on it
(tests/view/test_streamed_agents.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from support.long_sessions import LONG_TEXT, PROBE
from support.other_agents import load_demo_agents

__all__ = ["SESSION_ID", "a_long_codex_session"]

SESSION_ID = "0199b000-0000-7000-8000-0000000001a9"
CWD = "/home/me/tool"


def _turns(lines: Any, count: int, start: int) -> None:
    for i in range(start, start + count):
        lines.message("user", f"prompt {i} {PROBE}")
        lines.reasoning(f"thinking about {i}")
        lines.call(f"call_{i}", "shell", {"command": ["cat", f"f{i}"]}, f"{i} {LONG_TEXT}")
        lines.message("assistant", f"Done {i}.")


def a_long_codex_session(path: Path, turns: int = 20) -> Path:
    """The rollout (module docstring), ``turns`` prompts between each event."""
    demo = load_demo_agents()
    lines = demo.CodexLines(1_780_000_000.0)
    lines.session_meta(SESSION_ID, CWD)
    lines.turn_context(CWD)
    injected = "<environment_context>\n  <cwd>/home/me/tool</cwd>\n</environment_context>"
    lines.message("user", injected, echo=False)
    _turns(lines, turns, 0)
    output = {"type": "function_call_output", "call_id": "call_orphan", "output": "early"}
    lines.add("response_item", output)
    summary = "The user asked for files; each was read."
    lines.message("assistant", summary)
    history = [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "kept"}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": summary}]},
    ]
    lines.add("compacted", {"message": summary, "replacement_history": history})
    lines.turn_context(CWD, model="gpt-5.1-codex")
    _turns(lines, turns, turns)
    lines.add("event_msg", {"type": "thread_rolled_back", "num_turns": 2})
    _turns(lines, turns, 2 * turns)
    lines.lines.append("this line is not JSON {")
    lines.add("compacted", {"message": "An older compaction: a summary only."})
    _turns(lines, turns, 3 * turns)
    lines.add("event_msg", {"type": "thread_rolled_back", "num_turns": 1})  # the last goes
    _turns(lines, 1, 4 * turns)
    lines.add("event_msg", {"type": "thread_name_updated", "thread_name": "A long rollout"})
    lines.tokens(9000, 4000, 600)
    return demo.write_lines(path, lines.lines)
