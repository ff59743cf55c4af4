"""Session files of GitHub Copilot CLI, Cursor's agent CLI and opencode, written by the
tests in each agent's documented format (never copied from real sessions).

* Copilot CLI: `copilot_event` lines for ``session-state/<uuid>/events.jsonl`` and a
  ``workspace.yaml`` (`write_copilot_session`), the shape Copilot CLI 1.0.102 writes;
* Cursor: a chat's ``store.db`` (`write_cursor_store`: ``meta`` key ``"0"`` hex-encoded
  JSON, content-addressed ``blobs``, a protobuf root blob listing the message blobs'
  ids in field 1 and the workspace in field 9, WAL mode) and ``meta.json``; an
  ``agent-transcripts/<id>.jsonl`` (`write_cursor_transcript`);
* opencode: the tables of ``opencode.db`` its readers use (`write_opencode_db`) and the
  older ``storage/`` JSON layout (`write_opencode_storage`).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path
from typing import Any

Json = dict[str, Any]


# --------------------------------------------------------------------------- Copilot CLI


def copilot_event(kind: str, data: Json, ident: str, parent: str | None, second: int) -> Json:
    return {
        "type": kind,
        "data": data,
        "id": ident,
        "timestamp": f"2026-01-02T03:04:{second:02d}.000Z",
        "parentId": parent,
    }


def copilot_events(session_id: str, cwd: str) -> list[Json]:
    """A session: start, a prompt, a tool call and its result, a reply."""
    rows = [
        (
            "session.start",
            {
                "sessionId": session_id,
                "copilotVersion": "1.0.102",
                "producer": "copilot-agent",
                "selectedModel": "m1",
                "startTime": "2026-01-02T03:04:00.000Z",
                "context": {"cwd": cwd},
            },
        ),
        ("user.message", {"content": "list files", "transformedContent": "<ctx/>\n\nlist files"}),
        ("system.message", {"role": "system", "content": "You are Copilot."}),
        ("assistant.turn_start", {"turnId": "0"}),
        (
            "session.usage_record",
            {
                "usage": {
                    "inputTokens": 10,
                    "outputTokens": 2,
                    "cacheReadTokens": 1,
                    "cacheWriteTokens": 0,
                }
            },
        ),
        (
            "assistant.message",
            {
                "content": "",
                "model": "m1",
                "toolRequests": [
                    {"toolCallId": "c1", "name": "bash", "arguments": {"command": "ls"}}
                ],
            },
        ),
        ("tool.execution_start", {"toolCallId": "c1", "toolName": "bash"}),
        (
            "tool.execution_complete",
            {"toolCallId": "c1", "success": True, "result": {"content": "a.txt\nb.txt"}},
        ),
        (
            "session.usage_record",
            {
                "usage": {
                    "inputTokens": 20,
                    "outputTokens": 3,
                    "cacheReadTokens": 0,
                    "cacheWriteTokens": 4,
                }
            },
        ),
        ("assistant.message", {"content": "Two files.", "model": "m2", "toolRequests": []}),
        ("assistant.turn_end", {"turnId": "0"}),
    ]
    events, parent = [], None
    for number, (kind, data) in enumerate(rows):
        ident = f"e{number:02d}"
        events.append(copilot_event(kind, data, ident, parent, number))
        parent = ident
    return events


def write_copilot_session(
    root: Path, session_id: str, cwd: str, name: str = "list files", bare: bool = False
) -> Path:
    """``<root>/session-state/<id>/events.jsonl`` + ``workspace.yaml`` (``bare``: the
    older ``session-state/<id>.jsonl``); the events file."""
    state = root / "session-state"
    lines = "".join(json.dumps(e) + "\n" for e in copilot_events(session_id, cwd))
    if bare:
        state.mkdir(parents=True, exist_ok=True)
        path = state / f"{session_id}.jsonl"
    else:
        (state / session_id).mkdir(parents=True, exist_ok=True)
        path = state / session_id / "events.jsonl"
        (state / session_id / "workspace.yaml").write_text(
            f"id: {session_id}\ncwd: {cwd}\nname: {name}\nuser_named: false\nfork_count: 0\n"
        )
    path.write_text(lines)
    return path


# --------------------------------------------------------------------------- Cursor


def _varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    return _varint((number << 3) | 2) + _varint(len(payload)) + payload


def write_cursor_store(
    chat_dir: Path,
    messages: list[Json],
    *,
    name: str = "New Agent",
    cwd: str | None = None,
    workspace: str = "file:///home/me/app",
    created_ms: int = 1_767_323_040_000,
) -> sqlite3.Connection:
    """``<chat_dir>/store.db`` (WAL) holding ``messages`` (+ ``meta.json`` naming
    ``cwd``); the open connection, so a test can go on writing as the CLI would."""
    chat_dir.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(chat_dir / "store.db")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("CREATE TABLE blobs (id TEXT PRIMARY KEY, data BLOB)")
    conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")
    set_cursor_messages(conn, chat_dir.name, messages, name, workspace, created_ms)
    if cwd is not None:
        (chat_dir / "meta.json").write_text(
            json.dumps({"schemaVersion": 1, "cwd": cwd, "title": name, "createdAtMs": created_ms})
        )
    return conn


def set_cursor_messages(
    conn: sqlite3.Connection,
    agent_id: str,
    messages: list[Json],
    name: str = "New Agent",
    workspace: str = "file:///home/me/app",
    created_ms: int = 1_767_323_040_000,
) -> str:
    """Store ``messages`` and a new root blob listing them, as the CLI does after a
    turn; the root blob's id."""
    ids = []
    for message in messages:
        data = json.dumps(message, separators=(",", ":")).encode()
        ident = hashlib.sha256(data).hexdigest()
        conn.execute("INSERT OR IGNORE INTO blobs (id, data) VALUES (?, ?)", (ident, data))
        ids.append(ident)
    root = b"".join(_field(1, bytes.fromhex(i)) for i in ids) + _field(9, workspace.encode())
    root_id = hashlib.sha256(root).hexdigest()
    conn.execute("INSERT OR IGNORE INTO blobs (id, data) VALUES (?, ?)", (root_id, root))
    meta = {
        "agentId": agent_id,
        "latestRootBlobId": root_id,
        "name": name,
        "mode": "agent",
        "createdAt": created_ms,
        "lastUsedModel": "claude-4-sonnet",
    }
    conn.execute(
        "INSERT OR REPLACE INTO meta (key, value) VALUES ('0', ?)",
        (json.dumps(meta).encode().hex(),),
    )
    conn.commit()
    return root_id


CURSOR_MESSAGES: list[Json] = [
    {"role": "system", "content": "You are a coding agent."},
    {"role": "user", "content": [{"type": "text", "text": "<user_query>count lines</user_query>"}]},
    {
        "role": "assistant",
        "id": "a1",
        "content": [
            {"type": "reasoning", "text": "use wc"},
            {
                "type": "tool-call",
                "toolCallId": "t1",
                "toolName": "run_terminal_cmd",
                "args": {"command": "wc -l notes.txt"},
            },
        ],
    },
    {
        "role": "tool",
        "id": "r1",
        "content": [
            {
                "type": "tool-result",
                "toolCallId": "t1",
                "toolName": "run_terminal_cmd",
                "result": "3 notes.txt",
            }
        ],
    },
    {"role": "assistant", "id": "a2", "content": [{"type": "text", "text": "It has 3 lines."}]},
]


def write_cursor_transcript(path: Path, turns: list[tuple[str, str]]) -> Path:
    """An ``agent-transcripts/<id>.jsonl``: a line per (role, text)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "".join(
            json.dumps({"role": role, "message": {"content": [{"type": "text", "text": text}]}})
            + "\n"
            for role, text in turns
        )
    )
    return path


# --------------------------------------------------------------------------- opencode

_OPENCODE_SCHEMA = """
CREATE TABLE session (id text PRIMARY KEY, project_id text NOT NULL, parent_id text,
  slug text NOT NULL, directory text NOT NULL, title text NOT NULL, version text NOT NULL,
  revert text, time_created integer NOT NULL, time_updated integer NOT NULL);
CREATE TABLE message (id text PRIMARY KEY, session_id text NOT NULL,
  time_created integer NOT NULL, time_updated integer NOT NULL, data text NOT NULL);
CREATE TABLE part (id text PRIMARY KEY, message_id text NOT NULL, session_id text NOT NULL,
  time_created integer NOT NULL, time_updated integer NOT NULL, data text NOT NULL);
CREATE INDEX message_session_time_created_id_idx ON message (session_id, time_created, id);
CREATE INDEX part_session_idx ON part (session_id);
CREATE INDEX session_parent_idx ON session (parent_id);
"""


def opencode_turns(session_id: str) -> tuple[list[Json], dict[str, list[Json]]]:
    """A prompt, a tool call, a reply: (messages with ids, parts by message id)."""
    messages = [
        {"id": "msg_01", "role": "user", "time": {"created": 1000}},
        {
            "id": "msg_02",
            "role": "assistant",
            "parentID": "msg_01",
            "modelID": "m",
            "providerID": "p",
            "time": {"created": 2000},
            "tokens": {"input": 10, "output": 2, "reasoning": 1, "cache": {"read": 3, "write": 0}},
        },
        {
            "id": "msg_03",
            "role": "assistant",
            "parentID": "msg_01",
            "modelID": "m",
            "providerID": "p",
            "time": {"created": 3000},
            "tokens": {"input": 20, "output": 4, "reasoning": 0, "cache": {"read": 0, "write": 5}},
        },
    ]
    parts = {
        "msg_01": [{"id": "prt_01", "type": "text", "text": '"count files"'}],
        "msg_02": [
            {"id": "prt_02", "type": "step-start"},
            {
                "id": "prt_03",
                "type": "tool",
                "tool": "bash",
                "callID": "call_1",
                "state": {"status": "completed", "input": {"command": "ls"}, "output": "a\nb\n"},
            },
            {"id": "prt_04", "type": "step-finish", "reason": "tool-calls"},
        ],
        "msg_03": [{"id": "prt_05", "type": "text", "text": "Two files."}],
    }
    return messages, parts


def write_opencode_db(
    path: Path,
    session_id: str = "ses_a",
    directory: str = "/home/me/app",
    title: str = "Count files",
) -> sqlite3.Connection:
    """An ``opencode.db`` (WAL) with one session (`opencode_turns`); the connection."""
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.executescript(_OPENCODE_SCHEMA)
    add_opencode_session(conn, session_id, directory, title)
    return conn


def add_opencode_session(
    conn: sqlite3.Connection,
    session_id: str,
    directory: str,
    title: str,
    parent_id: str | None = None,
) -> None:
    conn.execute(
        "INSERT INTO session VALUES (?, 'global', ?, 'slug', ?, ?, '1.18.33', NULL, 500, 3000)",
        (session_id, parent_id, directory, title),
    )
    messages, parts = opencode_turns(session_id)
    for message in messages:
        data = {k: v for k, v in message.items() if k != "id"}
        created = message["time"]["created"]
        conn.execute(
            "INSERT INTO message VALUES (?, ?, ?, ?, ?)",
            (f"{session_id}_{message['id']}", session_id, created, created, json.dumps(data)),
        )
        for offset, part in enumerate(parts[message["id"]]):
            body = {k: v for k, v in part.items() if k != "id"}
            conn.execute(
                "INSERT INTO part VALUES (?, ?, ?, ?, ?, ?)",
                (
                    f"{session_id}_{part['id']}",
                    f"{session_id}_{message['id']}",
                    session_id,
                    created + offset,
                    created + offset,
                    json.dumps(body),
                ),
            )
    conn.commit()


def add_opencode_text_part(
    conn: sqlite3.Connection, session: str, part: str, text: str, at: int
) -> None:
    """A new assistant text part (and its message), as opencode writes a turn."""
    message = f"{session}_msg_{part}"
    data = {"role": "assistant", "time": {"created": at}}
    conn.execute(
        "INSERT INTO message VALUES (?, ?, ?, ?, ?)",
        (message, session, at, at, json.dumps(data)),
    )
    conn.execute(
        "INSERT INTO part VALUES (?, ?, ?, ?, ?, ?)",
        (f"{session}_{part}", message, session, at, at, json.dumps({"type": "text", "text": text})),
    )
    conn.execute("UPDATE session SET time_updated = ? WHERE id = ?", (at, session))
    conn.commit()


def write_opencode_storage(
    root: Path, session_id: str = "ses_old", directory: str = "/home/me/old"
) -> Path:
    """The older layout under ``root/storage``; the session file."""
    storage = root / "storage"
    session_file = storage / "session" / "proj1" / f"{session_id}.json"
    session_file.parent.mkdir(parents=True)
    session_file.write_text(
        json.dumps(
            {
                "id": session_id,
                "projectID": "proj1",
                "directory": directory,
                "title": "Old one",
                "version": "0.9.0",
                "time": {"created": 500, "updated": 3000},
            }
        )
    )
    messages, parts = opencode_turns(session_id)
    for message in messages:
        folder = storage / "message" / session_id
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{message['id']}.json").write_text(
            json.dumps({**message, "sessionID": session_id})
        )
        for part in parts[message["id"]]:
            part_dir = storage / "part" / message["id"]
            part_dir.mkdir(parents=True, exist_ok=True)
            (part_dir / f"{part['id']}.json").write_text(
                json.dumps({**part, "messageID": message["id"]})
            )
    return session_file


# --------------------------------------------------------------------------- comparing


def chat_view(messages: list[Json]) -> list[Json]:
    """Chat-completions messages as compared with a ``context.json``: role, content,
    the tool call id of a result and each call's id, name and parsed arguments (an
    agent's own extra keys and the JSON spacing of arguments left out)."""
    out = []
    for message in messages:
        kept = {k: message[k] for k in ("role", "content", "tool_call_id") if k in message}
        calls = message.get("tool_calls")
        if calls:
            kept["tool_calls"] = [
                (c["id"], c["function"]["name"], json.loads(c["function"]["arguments"]))
                for c in calls
            ]
        out.append(kept)
    return out
