#!/usr/bin/env python3
"""Find every session whose tool calls touched a file.

    contrib/examples/sessions_touching_file.py FILE [--mount DIR]

Every entry of every branch is looked at (entries/, not just the current transcript):
a raw byte search skips entries that cannot match, and only tool calls whose arguments
name FILE count. Prints "<session dir>\t<tool names>" per session.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path


def tool_calls(entry: dict) -> list[dict]:
    message = entry.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, list):
        return []
    return [b for b in content if isinstance(b, dict) and b.get("type") == "toolCall"]


def touches(call: dict, needle: str) -> bool:
    return needle in json.dumps(call.get("arguments"), ensure_ascii=False)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("file", help="a path or file name as the agent wrote it")
    default_mount = os.environ.get("SESSIONFS_MOUNT", str(Path.home() / "agent-sessions"))
    parser.add_argument("--mount", type=Path, default=Path(default_mount))
    args = parser.parse_args(argv)
    sessions = args.mount / "sessions"
    if not sessions.is_dir():
        print(f"sessions_touching_file: no sessionfs mount at {args.mount}", file=sys.stderr)
        return 2
    found = 0
    needle = args.file.encode()
    for session in sorted(p for p in sessions.glob("*/*") if (p / "entries").is_dir()):
        names: dict[str, None] = {}
        for entry_file in (session / "entries").iterdir():
            data = entry_file.read_bytes()
            if needle not in data:
                continue
            for call in tool_calls(json.loads(data)):
                if touches(call, args.file):
                    names.setdefault(str(call.get("name")), None)
        if names:
            found += 1
            print(f"{session}\t{','.join(names)}")
    return 0 if found else 1


if __name__ == "__main__":
    sys.exit(main())
