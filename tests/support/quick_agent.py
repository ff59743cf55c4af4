"""The quickest stand-in for an agent ``send`` can run: done in a few milliseconds.

Like `support.fake_agent` it continues the file from its last line (a user message
with the prompt, then ``answer to PROMPT``), but with the standard library only and
``python -S``: no start-up cost hides a race between a run's end and the next read.

Run: ``python -S quick_agent.py SESSION PROMPT``.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

QUICK_AGENT = Path(__file__).resolve()


def command() -> str:
    """An ``--agent-cmd`` template that runs this script."""
    return " ".join([sys.executable, "-S", str(QUICK_AGENT), "{session}"])


def _line(entry_id: str, parent: str, role: str, text: str) -> bytes:
    entry = {
        "type": "message",
        "id": entry_id,
        "parentId": parent,
        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime()),
        "message": {
            "role": role,
            "content": [{"type": "text", "text": text}],
            "timestamp": int(time.time() * 1000),
        },
    }
    return json.dumps(entry).encode() + b"\n"


def main() -> int:
    session, prompt = sys.argv[1], sys.argv[2]
    with open(session, "rb") as file:
        last = json.loads(file.read().splitlines()[-1])
    question, answer = os.urandom(4).hex(), os.urandom(4).hex()
    with open(session, "ab") as file:
        file.write(_line(question, last["id"], "user", prompt))
        file.write(_line(answer, question, "assistant", f"answer to {prompt}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
