"""A Claude Code session file shaped as Claude Code writes long ones, built line by line
with the demo's line makers (``contrib/demo_agents.py``): `a_long_claude_session`.

What `core.formats.claude_turns` reads is all there: responses split into a line per
block (thinking, text, parallel tool calls) sharing a ``message.id``, their results as
``user`` lines (one a sibling of the next call's line, so off the path), consecutive
user lines (a command's caveat, then the prompt: one message in ``context.json``), an
image, a rewind (a second branch the agent resumes from: ``last-prompt``), compactions
(the last with a preserved segment after its summary), junk and metadata lines. The
streamed renderings are checked against the renderings in memory on it
(tests/view/test_streamed_agents.py, tests/fs/test_huge_claude_file.py).
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

from support.long_sessions import LONG_TEXT, PROBE
from support.other_agents import load_demo_agents

__all__ = ["SESSION_ID", "a_long_claude_session", "claude_turns"]

SESSION_ID = "c1a0de00-0000-4000-8000-0000000001a9"
#: A 1x1 PNG.
_PNG = base64.b64encode(
    base64.b64decode(
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
    )
).decode()


def claude_turns(lines: Any, count: int, start: int = 0) -> None:
    """Prompts, each answered with thinking, text and two parallel tool calls, their
    results (a long output each; the first result hangs off the first call's line,
    so it is off the path) and a closing answer."""
    for i in range(start, start + count):
        lines.user(f"prompt {i} {PROBE}")
        read = {"type": "tool_use", "id": f"toolu_r{i}", "name": "Read", "input": {"n": i}}
        bash = {"type": "tool_use", "id": f"toolu_b{i}", "name": "Bash", "input": {"c": "ls"}}
        blocks = [
            {"type": "thinking", "thinking": f"step {i}\n\nthen", "signature": "sig"},
            {"type": "text", "text": f"Looking at {i}."},
            read,
            bash,
        ]
        read_line = lines.response(f"msg_{i}", blocks, (100 + i, 10, 5, 1))[2]
        lines.tool_result(f"toolu_b{i}", f"{i} bash output\n{LONG_TEXT}")
        after_bash = lines.last
        lines.tool_result(f"toolu_r{i}", f"{i} read {LONG_TEXT}", parent=read_line)
        error = {"tool_use_id": f"toolu_x{i}", "type": "tool_result", "content": "no call"}
        if i % 9 == 4:  # a result whose call is nowhere: it stays where it is
            lines.user([error, {"type": "text", "text": "and a remark"}], parent=after_bash)
        else:
            lines.last = after_bash
        lines.response(f"msg_{i}_end", [{"type": "text", "text": f"Done {i}."}], (1, 2, 3, 4))


def _compaction(lines: Any, summary: str, metadata: dict[str, Any]) -> None:
    """A ``compact_boundary`` (a new root, its logical parent the last line) and the
    summary under it; a preserved segment in ``metadata`` gets the summary as anchor."""
    boundary = lines.system(
        "compact_boundary",
        None,
        content="Conversation compacted",
        logicalParentUuid=lines.last,
        compactMetadata=metadata,
    )
    said = lines.user(summary, parent=boundary, isCompactSummary=True)
    if "preservedSegment" in metadata:
        metadata["preservedSegment"]["anchorUuid"] = said  # (the boundary line holds it)


def a_long_claude_session(path: Path, turns: int = 30) -> Path:
    """The session (module docstring), ``turns`` prompts between each event, written
    to ``path``."""
    demo = load_demo_agents()
    lines = demo.ClaudeLines(SESSION_ID, "/home/me/app", 1_780_000_000.0)
    lines.meta("summary", summary="An old summary", leafUuid="none")
    claude_turns(lines, turns)
    caveat = "<local-command-caveat>Caveat: local commands</local-command-caveat>"
    lines.user(caveat, isMeta=True)
    lines.user([{"type": "text", "text": f"and now a picture {PROBE}"}])
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": _PNG}}
    lines.user([image])
    lines.response("msg_pic", [{"type": "text", "text": "A pixel."}], (1, 1, 0, 0))
    fork = lines.last
    # A rewind: a branch the agent left (``--resume-session-at`` the picture's answer).
    lines.user(f"the rewound question {PROBE}")
    lines.response("msg_rewound", [{"type": "text", "text": "The rewound answer."}], (1, 1, 0, 0))
    lines.last = fork
    claude_turns(lines, turns, start=turns)
    lines.lines.append("this line is not JSON {")
    _compaction(lines, "Summary: the first turns.", {"trigger": "auto", "preTokens": 90000})
    claude_turns(lines, turns, start=2 * turns)
    kept_head = lines.last
    claude_turns(lines, 2, start=3 * turns)
    kept_tail = lines.last
    segment = {"headUuid": kept_head, "tailUuid": kept_tail}  # the anchor: its summary
    metadata = {"trigger": "manual", "preTokens": 120000, "preservedSegment": segment}
    _compaction(lines, "Summary: the second part.", metadata)
    claude_turns(lines, turns, start=3 * turns + 2)
    lines.user(caveat, isMeta=True)
    lines.user(f"the last prompt {PROBE}")
    lines.response("msg_last", [{"type": "text", "text": "The last answer."}], (1, 1, 0, 0))
    lines.meta("custom-title", customTitle="A long Claude session", sessionId=SESSION_ID)
    lines.meta("last-prompt", lastPrompt="the last prompt", leafUuid=lines.last)
    claude_turns(lines, 1, start=10_000)  # after the line the agent resumes at: not shown
    return demo.write_lines(path, lines.lines)
