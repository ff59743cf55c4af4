"""Generate a demo agent dir with the core engine, for trying the mount.

    python contrib/demo.py DIR        # creates DIR/sessions/..., DIR/blobs, DIR/history.db

What it holds (so every part of the mount has something to show): three projects;
sessions with several branches, labels, a compaction, a branch summary, tool calls
and results, thinking, an image (externalised to the blob store by core), a
custom message, one old v1 file (no ids, numeric compaction index) that the mount
shows migrated without rewriting it, and a task-tool run: a sub-agent session file and
a tool output in the CLI session's artifacts dir (``<stem>/``, as the agents write
them). File mtimes are spread over a few days so ``recent/`` has a meaningful order.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import struct
import sys
import time
import zlib
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from core import SessionManager, paths

MODEL = {"provider": "anthropic", "model": "claude-sonnet-4-5"}


def _usage(tokens_in: int, tokens_out: int) -> dict[str, Any]:
    return {
        "input": tokens_in,
        "output": tokens_out,
        "cacheRead": 0,
        "cacheWrite": 0,
        "totalTokens": tokens_in + tokens_out,
        "cost": {"input": 0.0, "output": 0.0, "cacheRead": 0, "cacheWrite": 0, "total": 0.0},
    }


def _ms() -> int:
    return time.time_ns() // 1_000_000


def user(text: str, images: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": text}]
    content += images or []
    return {"role": "user", "content": content, "timestamp": _ms()}


def assistant(text: str, thinking: str | None = None, tool: dict[str, Any] | None = None) -> dict:
    content: list[dict[str, Any]] = []
    if thinking:
        content.append({"type": "thinking", "thinking": thinking})
    content.append({"type": "text", "text": text})
    if tool:
        content.append({"type": "toolCall", **tool})
    return {
        "role": "assistant",
        "content": content,
        **MODEL,
        "api": "anthropic-messages",
        "usage": _usage(1200, 240),
        "stopReason": "toolUse" if tool else "stop",
        "timestamp": _ms(),
    }


def tool_result(call_id: str, name: str, text: str, error: bool = False) -> dict[str, Any]:
    return {
        "role": "toolResult",
        "toolCallId": call_id,
        "toolName": name,
        "content": [{"type": "text", "text": text}],
        "isError": error,
        "timestamp": _ms(),
    }


def png_image(width: int = 48, height: int = 48) -> dict[str, Any]:
    """A real (tiny, gradient) PNG as an image block; big enough to become a blob."""
    rows = b"".join(
        b"\x00"
        + bytes(c for x in range(width) for c in (x * 5 % 256, y * 5 % 256, (x + y) * 3 % 256))
        for y in range(height)
    )

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows, 0))
    png += chunk(b"IEND", b"")
    return {"type": "image", "data": base64.b64encode(png).decode(), "mimeType": "image/png"}


def _new(agent_dir: Path, cwd: str, title: str) -> SessionManager:
    manager = SessionManager.create(cwd, session_dir=paths.session_dir_for_cwd(cwd, agent_dir))
    manager.set_session_name(title, "user")
    return manager


def webapp_session(agent_dir: Path) -> str:
    """Branches, labels, a branch summary, an image blob, thinking, tool calls."""
    sm = _new(agent_dir, "/home/demo/webapp", "Fix the login redirect loop")
    sm.append_model_change("anthropic/claude-sonnet-4-5")
    sm.append_thinking_level_change("medium")
    first = sm.append_message(
        user(
            "The login page redirects forever after a session expires. Here is what I see:",
            [png_image()],
        )
    )
    sm.append_message(
        assistant(
            "Let me look at the auth middleware.",
            thinking="A redirect loop usually means the login route itself requires auth.",
            tool={"id": "call_1", "name": "read", "arguments": {"path": "src/auth.ts"}},
        )
    )
    sm.append_message(
        tool_result(
            "call_1",
            "read",
            "export function requireAuth(req, res, next) {\n"
            "  if (!req.session.user) return res.redirect('/login');\n  next();\n}\n",
        )
    )
    plan = sm.append_message(
        assistant(
            "`requireAuth` is applied to `/login` too. Two options: exempt the route, "
            "or move the middleware below the public routes."
        )
    )
    sm.append_label_change(plan, "plan")
    sm.append_message(user("Exempt the route."))
    sm.append_message(
        assistant(
            "Done: `/login` and `/logout` are now public.",
            tool={"id": "call_2", "name": "edit", "arguments": {"path": "src/auth.ts"}},
        )
    )
    fixed = sm.append_message(tool_result("call_2", "edit", "Applied 1 edit."))
    sm.append_label_change(fixed, "fix-exempt-route")
    # Second branch: back to the plan, try the other option.
    sm.branch(plan)
    sm.append_message(user("Actually, move the middleware instead."))
    moved = sm.append_message(assistant("Moved `app.use(requireAuth)` below the public routes."))
    sm.append_label_change(moved, "fix-move-middleware")
    # Third branch, with a summary of the abandoned one.
    sm.branch_with_summary(
        first, "Tried exempting /login and moving the middleware; both work, moving is cleaner."
    )
    sm.append_message(user("Write a regression test for the redirect loop."))
    sm.append_message(
        assistant(
            "Added `test/login-redirect.test.ts`.",
            tool={"id": "call_3", "name": "bash", "arguments": {"command": "npm test"}},
        )
    )
    sm.append_message(tool_result("call_3", "bash", "PASS test/login-redirect.test.ts (3 tests)"))
    sm.append_custom_message_entry("note", "Remember to deploy after review.", display=True)
    sm.flush()
    sm.close()
    return str(sm.get_session_file())


def compacted_session(agent_dir: Path) -> str:
    """A long-ish session with a compaction in the middle."""
    sm = _new(agent_dir, "/home/demo/webapp", "Migrate the database layer to async")
    kept = None
    for step in range(12):
        entry = sm.append_message(user(f"Step {step}: convert the next repository module."))
        if step == 8:
            kept = entry
        sm.append_message(assistant(f"Converted module {step} to async/await; tests pass."))
    sm.append_compaction(
        "Converted repositories 0-7 to async. Remaining: 8-11. Connection pool is shared.",
        "async migration, 8 of 12 left",
        kept,
        48_000,
    )
    sm.append_message(user("Continue with the rest."))
    sm.append_message(assistant("All twelve repository modules are async now."))
    sm.flush()
    sm.close()
    return str(sm.get_session_file())


def cli_session(agent_dir: Path) -> str:
    sm = _new(agent_dir, "/home/demo/cli-tool", "Add a --json flag")
    sm.append_message(user("Add a --json flag to the list command."))
    sm.append_model_change("openai/gpt-5", role="smol")
    sm.append_message(
        {
            "role": "bashExecution",
            "command": "ls src/commands",
            "output": "list.ts\nshow.ts\n",
            "exitCode": 0,
            "timestamp": _ms(),
        }
    )
    sm.append_message(
        assistant(
            "Let me ask a sub-agent which output formats the other commands support.",
            tool={"id": "call_t", "name": "task", "arguments": {"task": "List output formats"}},
        )
    )
    sm.append_message(
        tool_result("call_t", "task", "show.ts prints YAML; nothing prints JSON yet.")
    )
    sm.append_message(assistant("Added `--json`; it prints one object per line."))
    sm.flush()
    sm.close()
    file = str(sm.get_session_file())
    sub_agent_run(Path(file).with_suffix(""), "0-OutputFormats")
    return file


def sub_agent_run(artifacts_dir: Path, task_id: str) -> str:
    """What the task tool leaves in the parent's artifacts dir: the sub-agent's own
    session file ``<task-id>.jsonl`` and a tool output it produced."""
    sm = SessionManager.create("/home/demo/cli-tool", session_dir=artifacts_dir)
    sm.append_message(user("List the output formats each command in src/commands supports."))
    sm.append_message(
        assistant(
            "Searching the commands.",
            tool={"id": "call_g", "name": "grep", "arguments": {"pattern": "format"}},
        )
    )
    output = "src/commands/show.ts:12:  format: 'yaml',\n"
    sm.append_message(tool_result("call_g", "grep", output))
    sm.append_message(assistant("show.ts prints YAML; nothing prints JSON yet."))
    sm.flush()
    sm.close()
    file = artifacts_dir / f"{task_id}.jsonl"
    os.replace(str(sm.get_session_file()), file)
    (artifacts_dir / "grep-1.log").write_text(output)
    return str(file)


def v1_session(agent_dir: Path) -> str:
    """An old-format file as early agent versions wrote it (migrated only in memory)."""
    directory = paths.session_dir_for_cwd("/home/demo/notes", agent_dir)
    directory.mkdir(parents=True, exist_ok=True)
    stamp = "2025-11-02T09:15:00.000Z"
    session_id = "0a1b2c3d-1111-4222-8333-944455556666"
    lines = [
        {
            "type": "session",
            "id": session_id,
            "timestamp": stamp,
            "cwd": "/home/demo/notes",
            "provider": "anthropic",
            "modelId": "claude-opus-4-5",
            "thinkingLevel": "off",
        },
        {"type": "message", "timestamp": stamp, "message": user("Summarise my meeting notes.")},
        {
            "type": "message",
            "timestamp": stamp,
            "message": assistant("Three decisions: ship Friday, freeze the API, hire one more."),
        },
        {"type": "thinking_level_change", "timestamp": stamp, "thinkingLevel": "high"},
        {
            "type": "compaction",
            "timestamp": stamp,
            "summary": "Meeting notes summarised.",
            "firstKeptEntryIndex": 2,
            "tokensBefore": 9000,
        },
        {"type": "message", "timestamp": stamp, "message": user("And the action items?")},
        {
            "type": "message",
            "timestamp": stamp,
            "message": assistant("Alice: release notes. Bob: API freeze memo."),
        },
    ]
    path = directory / paths.session_file_name(stamp, session_id)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return str(path)


def history(agent_dir: Path) -> None:
    from core.history import HistoryStorage

    store = HistoryStorage(paths.history_db_path(agent_dir))
    for cwd, prompt in [
        ("/home/demo/notes", "Summarise my meeting notes."),
        ("/home/demo/webapp", "The login page redirects forever after a session expires."),
        ("/home/demo/webapp", "Write a regression test for the redirect loop."),
        ("/home/demo/cli-tool", "Add a --json flag to the list command."),
    ]:
        store.add(prompt, cwd)
    store.close()


def generate(agent_dir: Path) -> list[str]:
    """Create the demo under ``agent_dir``; returns the session files, oldest first."""
    agent_dir.mkdir(parents=True, exist_ok=True)
    files = [
        v1_session(agent_dir),
        cli_session(agent_dir),
        compacted_session(agent_dir),
        webapp_session(agent_dir),
    ]
    now = time.time()
    for age_days, file in zip((4, 3, 2, 1), files, strict=True):
        os.utime(file, (now - age_days * 86400, now - age_days * 86400))
    history(agent_dir)
    return files


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("agent_dir", type=Path)
    args = parser.parse_args()
    if (args.agent_dir / "sessions").exists():
        print(f"{args.agent_dir} already has sessions; not touching it", file=sys.stderr)
        return 1
    for file in generate(args.agent_dir):
        print(file)
    return 0


if __name__ == "__main__":
    sys.exit(main())
