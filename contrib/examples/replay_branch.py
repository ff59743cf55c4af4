#!/usr/bin/env python3
"""Replay a session's current branch, one message at a time, from the mount.

    contrib/examples/replay_branch.py SESSION_DIR [--delay SECONDS] [--width N]

Walks SESSION_DIR/path/ (the root->leaf path, in order) and prints each entry's role,
time and text, pausing between steps — a way to re-read how a conversation unfolded.
Only reads the mount; works on any session directory, e.g. ~/agent-sessions/recent/1.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path


def entry_text(entry: dict) -> str:
    """The readable part of an entry: message text, tool calls, summaries."""
    if entry.get("type") in ("compaction", "branch_summary"):
        return str(entry.get("summary", ""))
    message = entry.get("message") or {}
    content = message.get("content", entry.get("content", ""))
    if isinstance(content, str):
        return content
    parts = []
    for block in content if isinstance(content, list) else []:
        kind = block.get("type")
        if kind == "text":
            parts.append(block.get("text", ""))
        elif kind == "thinking":
            parts.append("(thinking) " + block.get("thinking", ""))
        elif kind == "toolCall":
            parts.append(f"-> {block.get('name')}({json.dumps(block.get('arguments'))})")
        elif kind == "image":
            parts.append("[image]")
    return "\n".join(parts)


def entry_role(entry: dict) -> str:
    message = entry.get("message")
    return message.get("role", "?") if isinstance(message, dict) else entry.get("type", "?")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("session_dir", type=Path)
    parser.add_argument("--delay", type=float, default=0.0, help="seconds between steps")
    parser.add_argument("--width", type=int, default=400, help="cut each text to N chars")
    args = parser.parse_args(argv)
    path_dir = args.session_dir / "path"
    if not path_dir.is_dir():
        print(f"replay_branch: {args.session_dir} is not a session directory", file=sys.stderr)
        return 2
    steps = sorted(path_dir.iterdir(), key=lambda p: p.name)  # NNNN- prefix keeps order
    for number, link in enumerate(steps, start=1):
        entry = json.loads(link.read_bytes())
        text = entry_text(entry).strip()
        if len(text) > args.width:
            text = text[: args.width] + "…"
        stamp = entry.get("timestamp", "")
        print(f"[{number}/{len(steps)}] {entry_role(entry)} · {entry['id']} · {stamp}")
        if text:
            print(text)
        print()
        if args.delay and number < len(steps):
            time.sleep(args.delay)
    return 0


if __name__ == "__main__":
    sys.exit(main())
