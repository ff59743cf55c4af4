"""Small Claude Code and Codex trees for the demo, written in the agents' own formats.

    python contrib/demo_agents.py CLAUDE_DIR CODEX_DIR

`write_claude_home` makes ``CLAUDE_DIR/projects/-home-demo-webapp/<id>.jsonl``: a model
response written as one line per content block (thinking, text, tool_use: one
``message.id``), a rewind (two user lines under one entry, the newer branch resumed),
a title line and a sub-agent (``<id>/subagents/agent-<a>.jsonl`` with its
``.meta.json``). `write_codex_home` makes one rollout under
``CODEX_DIR/sessions/YYYY/MM/DD/``: every user and assistant text twice (a
``response_item`` and an ``event_msg``), a function call and its output, a reasoning
summary, token counts, and the title in ``session_index.jsonl``. The tests build
their richer trees with the same line makers (`ClaudeLines`, `CodexLines`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

__all__ = ["ClaudeLines", "CodexLines", "write_claude_home", "write_codex_home", "write_lines"]

Line = dict[str, Any]

DEMO_SESSION_ID = "5d0c3a52-9a8e-4c1b-8f0e-2b7d6c1a9e01"
DEMO_ROLLOUT_ID = "0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"


def _iso(seconds: float) -> str:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds))
    return f"{stamp}.{int(seconds * 1000) % 1000:03d}Z"


def write_lines(path: Path, lines: Iterable[Line | str]) -> Path:
    """One JSON object per line (a ``str`` is written as it is: a junk line)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "".join((ln if isinstance(ln, str) else json.dumps(ln)) + "\n" for ln in lines)
    path.write_text(text)
    return path


class ClaudeLines:
    """Chain lines of one Claude Code session, each a child of the previous one unless
    ``parent`` says otherwise; timestamps one second apart from ``start``."""

    def __init__(
        self,
        session_id: str,
        cwd: str,
        start: float,
        *,
        sidechain: bool = False,
        agent_id: str | None = None,
    ) -> None:
        self.session_id = session_id
        self.cwd = cwd
        self.clock = start
        self.sidechain = sidechain
        self.agent_id = agent_id
        self.last: str | None = None
        self.lines: list[Line] = []

    def _chain(self, kind: str, parent: str | bool | None, fields: Line) -> str:
        self.clock += 1
        line_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{self.session_id}/{len(self.lines)}"))
        line: Line = {
            "parentUuid": self.last if parent is True else parent,
            "isSidechain": self.sidechain,
            "userType": "external",
            "cwd": self.cwd,
            "sessionId": self.session_id,
            "version": "2.0.14",
            "gitBranch": "main",
        }
        if self.agent_id is not None:
            line["agentId"] = self.agent_id
        line |= {"type": kind, **fields, "uuid": line_id, "timestamp": _iso(self.clock)}
        self.lines.append(line)
        self.last = line_id
        return line_id

    def user(
        self, content: str | list[Line], parent: str | bool | None = True, **extra: Any
    ) -> str:
        return self._chain(
            "user", parent, {"message": {"role": "user", "content": content}, **extra}
        )

    def tool_result(self, tool_use_id: str, text: str, parent: str | bool | None = True) -> str:
        block = {"tool_use_id": tool_use_id, "type": "tool_result", "content": text}
        return self.user([block], parent, toolUseResult={"stdout": text, "stderr": ""})

    def response(
        self,
        message_id: str,
        blocks: list[Line],
        usage: tuple[int, int, int, int],
        parent: str | bool | None = True,
    ) -> list[str]:
        """One model response: a line per content block, all with ``message_id`` and
        the same usage (input, output, cache read, cache creation)."""
        tokens_in, tokens_out, cache_read, cache_write = usage
        ids = []
        for n, block in enumerate(blocks):
            message = {
                "id": message_id,
                "type": "message",
                "role": "assistant",
                "model": "claude-sonnet-4-5-20250929",
                "content": [block],
                "stop_reason": "tool_use" if block["type"] == "tool_use" else None,
                "usage": {
                    "input_tokens": tokens_in,
                    "output_tokens": tokens_out,
                    "cache_read_input_tokens": cache_read,
                    "cache_creation_input_tokens": cache_write,
                },
            }
            fields = {"message": message, "requestId": f"req_{message_id}"}
            ids.append(self._chain("assistant", parent if n == 0 else True, fields))
        return ids

    def system(self, subtype: str, parent: str | bool | None = True, **fields: Any) -> str:
        """A ``system`` chain line (``compact_boundary``: ``parent=None`` and a
        ``logicalParentUuid``)."""
        return self._chain("system", parent, {"subtype": subtype, "level": "info", **fields})

    def meta(self, kind: str, **fields: Any) -> None:
        """A metadata line (no ``uuid``): a title, a summary, a snapshot, ..."""
        self.lines.append({"type": kind, **fields})


def write_claude_home(root: Path, start: float | None = None) -> list[Path]:
    """The demo's Claude Code dir (module docstring); returns the files written."""
    begin = (time.time() - 2 * 86400) if start is None else start
    project = root / "projects" / "-home-demo-webapp"
    s = ClaudeLines(DEMO_SESSION_ID, "/home/demo/webapp", begin)
    s.meta("file-history-snapshot", messageId="snap-1", snapshot={}, isSnapshotUpdate=False)
    s.user("Why does the login page redirect forever after the session expires?")
    s.response(
        "msg_demo_01",
        [
            {
                "type": "thinking",
                "thinking": "The auth middleware probably guards /login.",
                "signature": "c2lnbmF0dXJl",
            },
            {"type": "text", "text": "Let me look at the auth middleware."},
            {
                "type": "tool_use",
                "id": "toolu_demo_01",
                "name": "Read",
                "input": {"file_path": "/home/demo/webapp/src/auth.ts"},
            },
        ],
        (1200, 180, 0, 1100),
    )
    s.tool_result("toolu_demo_01", "export function requireAuth(req, res, next) { ... }")
    s.response(
        "msg_demo_02",
        [
            {"type": "text", "text": "`requireAuth` guards `/login` too: a redirect loop."},
            {
                "type": "tool_use",
                "id": "toolu_demo_02",
                "name": "Task",
                "input": {
                    "description": "Find requireAuth uses",
                    "prompt": "Where is requireAuth applied?",
                    "subagent_type": "Explore",
                },
            },
        ],
        (1500, 90, 1100, 0),
    )
    s.tool_result("toolu_demo_02", "requireAuth is applied in src/app.ts:14 and src/routes.ts:3")
    fork = s.response(
        "msg_demo_03", [{"type": "text", "text": "Exempt /login or move it?"}], (1700, 20, 1100, 0)
    )[-1]
    s.user("Exempt /login from the middleware.", parent=fork)
    s.response(
        "msg_demo_04",
        [{"type": "text", "text": "Exempted /login in src/app.ts."}],
        (1800, 30, 1100, 0),
    )
    # The rewind: the user went back to the question and chose the other way.
    s.user("No: move the middleware below the login route instead.", parent=fork)
    s.response(
        "msg_demo_05",
        [{"type": "text", "text": "Moved requireAuth below /login."}],
        (1900, 40, 1100, 0),
    )
    s.meta("custom-title", customTitle="Fix the login redirect loop", sessionId=DEMO_SESSION_ID)
    main = write_lines(project / f"{DEMO_SESSION_ID}.jsonl", s.lines)

    agent = ClaudeLines(
        DEMO_SESSION_ID, "/home/demo/webapp", begin + 5, sidechain=True, agent_id="a7c3e91"
    )
    agent.user("Where is requireAuth applied?")
    agent.response(
        "msg_demo_sub_01",
        [{"type": "text", "text": "src/app.ts:14 and src/routes.ts:3"}],
        (400, 25, 0, 0),
    )
    sub_dir = project / DEMO_SESSION_ID / "subagents"
    sub = write_lines(sub_dir / "agent-a7c3e91.jsonl", agent.lines)
    (sub_dir / "agent-a7c3e91.meta.json").write_text(
        json.dumps(
            {
                "agentType": "Explore",
                "description": "Find requireAuth uses",
                "toolUseId": "toolu_demo_02",
            }
        )
    )
    return [main, sub]


class CodexLines:
    """Lines of one Codex rollout: ``{timestamp, type, payload}``, a second apart."""

    def __init__(self, start: float) -> None:
        self.clock = start
        self.lines: list[Line] = []

    def add(self, kind: str, payload: Line) -> None:
        self.clock += 1
        self.lines.append({"timestamp": _iso(self.clock), "type": kind, "payload": payload})

    def session_meta(self, session_id: str, cwd: str, **extra: Any) -> None:
        self.add(
            "session_meta",
            {
                "id": session_id,
                "timestamp": _iso(self.clock),
                "cwd": cwd,
                "originator": "codex_cli_rs",
                "cli_version": "0.58.0",
                "source": "cli",
                "model_provider": "openai",
                "base_instructions": {"text": "You are Codex, a coding agent."},
                "git": {
                    "commit_hash": "4e1f0c2",
                    "branch": "main",
                    "repository_url": "git@example.com:demo/cli-tool.git",
                },
                **extra,
            },
        )

    def turn_context(self, cwd: str, model: str = "gpt-5-codex") -> None:
        self.add(
            "turn_context",
            {
                "cwd": cwd,
                "approval_policy": "on-request",
                "sandbox_policy": {"mode": "workspace-write"},
                "model": model,
                "effort": "medium",
                "summary": "auto",
            },
        )

    def message(self, role: str, text: str, *, echo: bool = True) -> None:
        """A ``response_item`` message and, for user and assistant text, the
        ``event_msg`` copy the CLI writes beside it."""
        kind = "output_text" if role == "assistant" else "input_text"
        self.add(
            "response_item",
            {"type": "message", "role": role, "content": [{"type": kind, "text": text}]},
        )
        if echo and role == "user":
            self.add("event_msg", {"type": "user_message", "message": text, "images": []})
        elif echo and role == "assistant":
            self.add("event_msg", {"type": "agent_message", "message": text})

    def reasoning(self, summary: str) -> None:
        self.add(
            "response_item",
            {
                "type": "reasoning",
                "summary": [{"type": "summary_text", "text": summary}],
                "encrypted_content": "gAAAAABdemo",
            },
        )
        self.add("event_msg", {"type": "agent_reasoning", "text": summary})

    def call(self, call_id: str, name: str, arguments: Line, output: str) -> None:
        self.add(
            "response_item",
            {
                "type": "function_call",
                "name": name,
                "arguments": json.dumps(arguments),
                "call_id": call_id,
            },
        )
        self.add(
            "response_item", {"type": "function_call_output", "call_id": call_id, "output": output}
        )

    def tokens(self, tokens_in: int, cached: int, tokens_out: int) -> None:
        total = {
            "input_tokens": tokens_in,
            "cached_input_tokens": cached,
            "output_tokens": tokens_out,
            "reasoning_output_tokens": 0,
            "total_tokens": tokens_in + tokens_out,
        }
        self.add(
            "event_msg",
            {
                "type": "token_count",
                "info": {"total_token_usage": total, "last_token_usage": total},
            },
        )


def rollout_path(root: Path, started: float, session_id: str, archived: bool = False) -> Path:
    """Where the CLI writes a rollout started at ``started`` (local time in the name)."""
    local = time.localtime(started)
    name = f"rollout-{time.strftime('%Y-%m-%dT%H-%M-%S', local)}-{session_id}.jsonl"
    if archived:
        return root / "archived_sessions" / name
    return root / "sessions" / time.strftime("%Y/%m/%d", local) / name


def write_codex_home(root: Path, start: float | None = None) -> list[Path]:
    """The demo's Codex dir (module docstring); returns the files written."""
    begin = (time.time() - 86400) if start is None else start
    cwd = "/home/demo/cli-tool"
    r = CodexLines(begin)
    r.session_meta(DEMO_ROLLOUT_ID, cwd)
    r.message(
        "user", f"<environment_context>\n  <cwd>{cwd}</cwd>\n</environment_context>", echo=False
    )
    r.turn_context(cwd)
    r.message("user", "Add a --json flag to the list command.")
    r.reasoning("**Finding the list command**")
    r.call(
        "call_demo_1",
        "shell",
        {"command": ["rg", "-n", "def list_cmd", "src"]},
        "src/cli.py:12:def list_cmd(args):",
    )
    r.message("assistant", "Added `--json` to `list`: it prints one JSON object per item.")
    r.tokens(5200, 3100, 240)
    path = write_lines(rollout_path(root, begin, DEMO_ROLLOUT_ID), r.lines)
    write_lines(
        root / "session_index.jsonl",
        [
            {
                "id": DEMO_ROLLOUT_ID,
                "thread_name": "JSON output for list",
                "updated_at": _iso(begin),
            },
        ],
    )
    return [path]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("claude_dir", type=Path)
    parser.add_argument("codex_dir", type=Path)
    args = parser.parse_args()
    for root in (args.claude_dir, args.codex_dir):
        if root.exists() and any(root.iterdir()):
            print(f"{root} is not empty; not touching it", file=sys.stderr)
            return 1
    for path in (*write_claude_home(args.claude_dir), *write_codex_home(args.codex_dir)):
        print(os.fspath(path))
    return 0


if __name__ == "__main__":
    sys.exit(main())
