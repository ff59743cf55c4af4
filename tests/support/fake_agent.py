"""A small stand-in for a coding agent that ``send`` runs in the tests.

It does what the real agents do with ``--session FILE -p PROMPT``: load the file,
continue from its last entry, append the prompt as a user message and the model's
answer as an assistant message (through core, which writes the agents' own format).
On stdout (``send.log``) it prints one JSON line: the texts of the context it
continued from (what a model would have been sent), its cwd and its pid.

Run: ``python fake_agent.py [--sleep S] [--exit N] [--spam BYTES] SESSION PROMPT``.
``--sleep`` waits between the two messages (a slow model), ``--exit`` ends with that
status after answering, ``--spam`` prints that many bytes of output first.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from core import SessionManager

FAKE_AGENT = Path(__file__).resolve()


def command(*options: str) -> str:
    """An ``--agent-cmd`` template that runs this script."""
    return " ".join([sys.executable, str(FAKE_AGENT), *options, "{session}"])


def _texts(context: dict[str, Any]) -> list[str]:
    texts = []
    for message in context.get("messages", []):
        content = message.get("content")
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            texts.extend(b.get("text", "") for b in content if isinstance(b, dict))
    return texts


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sleep", type=float, default=0.0)
    parser.add_argument("--exit", type=int, default=0)
    parser.add_argument("--spam", type=int, default=0)
    parser.add_argument("session")
    parser.add_argument("prompt")
    args = parser.parse_args()
    if args.spam:
        sys.stdout.write("x" * (args.spam - 1) + "\n")
        sys.stdout.flush()
    manager = SessionManager.open(args.session, browse=True)
    seen = _texts(manager.build_session_context())
    now = int(time.time() * 1000)
    manager.append_message(
        {"role": "user", "content": [{"type": "text", "text": args.prompt}], "timestamp": now}
    )
    manager.flush()
    time.sleep(args.sleep)
    manager.append_message(
        {
            "role": "assistant",
            "content": [{"type": "text", "text": f"answer to {args.prompt}"}],
            "provider": "fake",
            "model": "fake-model",
            "stopReason": "stop",
            "timestamp": now + 1,
        }
    )
    manager.flush()
    print(json.dumps({"context": seen, "cwd": os.getcwd(), "pid": os.getpid()}), flush=True)
    return args.exit


if __name__ == "__main__":
    sys.exit(main())
