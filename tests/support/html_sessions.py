"""A hostile xcsh agent dir for the tests of ``transcript.html``: markup in the title,
the cwd, every message, and entry ids that would be ``javascript:`` links or break out
of an attribute, on two branches (so the branch pages get them too)."""

from __future__ import annotations

from pathlib import Path

import orjson

from support.agent_messages import user_entry

__all__ = ["HOSTILE", "HOSTILE_PROJECT", "hostile_agent"]

HOSTILE = "<script>document.title='pwned'</script><img src=x onerror=alert(1)>"
HOSTILE_PROJECT = "--hostile--"


def hostile_agent(tmp_path: Path, payload: str = HOSTILE) -> Path:
    """``<tmp>/agent`` with ``sessions/--hostile--/hostile.jsonl``: a chain
    ``javascript:alert(1)`` -> ``x"><script>...`` -> ``ok`` and a side branch ``side``
    (the leaf: the file's last entry) under the first, every text ``payload``."""
    agent = tmp_path / "agent"
    project = agent / "sessions" / HOSTILE_PROJECT
    project.mkdir(parents=True)
    header = {
        "type": "session",
        "version": 3,
        "id": "h",
        "timestamp": "2026-01-01T00:00:00Z",
        "cwd": payload,
        "title": payload,
    }
    rows = [header]
    parent = None
    for n, entry_id in enumerate(["javascript:alert(1)", 'x"><script>alert(2)</script>', "ok"]):
        rows.append(user_entry(entry_id, parent, payload, timestamp=f"2026-01-01T00:00:0{n + 1}Z"))
        parent = entry_id
    rows.append(user_entry("side", "javascript:alert(1)", "side " + payload))
    (project / "hostile.jsonl").write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    return agent
