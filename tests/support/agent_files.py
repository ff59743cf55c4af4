"""Reading the session files the real agents (pi, omp) wrote, as the tests inspect them:
every JSON line as it is on disk (omp 18's title slot and the header included), the
entries after them, and the messages as (role, text)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from support.fake_model_server import message_text

Json = dict[str, Any]

#: Lines that are no entry: omp 18's title slot and the session header.
_NOT_ENTRIES = ("title", "session")


def lines_of(file: Path) -> list[Json]:
    return [json.loads(line) for line in file.read_bytes().splitlines() if line.strip()]


def header_of(file: Path) -> Json:
    return next(line for line in lines_of(file) if line["type"] == "session")


def entries_of(file: Path) -> list[Json]:
    return [line for line in lines_of(file) if line["type"] not in _NOT_ENTRIES]


def said(file: Path) -> list[tuple[str, str]]:
    """(role, text) of every message entry, in file order."""
    return [
        (e["message"]["role"], message_text(e["message"]))
        for e in entries_of(file)
        if e["type"] == "message"
    ]


def message_entry(file: Path, role: str, text: str) -> Json:
    """The one message entry of ``role`` whose text is ``text``."""
    (entry,) = [
        e
        for e in entries_of(file)
        if e["type"] == "message"
        and e["message"]["role"] == role
        and message_text(e["message"]) == text
    ]
    return entry


def last_assistant_text(file: Path) -> str:
    return [text for role, text in said(file) if role == "assistant"][-1]
