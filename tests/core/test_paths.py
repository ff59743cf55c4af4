"""Agent-dir layout and the names the agents give files and terminals."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from core.paths import (
    agent_dir_for_session_file,
    default_agent_dir,
    encode_cwd,
    file_timestamp,
    iso_to_ms,
    ms_to_iso,
    new_entry_id,
    new_session_id,
    now_iso,
    session_dir_for_cwd,
    session_file_name,
    terminal_id,
)


def test_encode_cwd():
    assert encode_cwd("/work/pi") == "--work-pi--"
    assert encode_cwd("C:\\Users\\me") == "--C--Users-me--"
    assert encode_cwd("\\srv\\x") == "--srv-x--"
    assert encode_cwd("/") == "----"


def test_session_dir_for_cwd(tmp_path):
    assert session_dir_for_cwd("/work/pi", tmp_path) == tmp_path / "sessions" / "--work-pi--"


def test_default_agent_dir_honours_env(monkeypatch, tmp_path):
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(tmp_path))
    assert default_agent_dir() == tmp_path
    monkeypatch.delenv("PI_CODING_AGENT_DIR")
    assert default_agent_dir() == Path.home() / ".xcsh" / "agent"


def test_file_names():
    assert file_timestamp("2026-02-16T10:20:30.000Z") == "2026-02-16T10-20-30-000Z"
    assert (
        session_file_name("2026-02-16T10:20:30.000Z", "abc") == "2026-02-16T10-20-30-000Z_abc.jsonl"
    )


def test_agent_dir_for_session_file(tmp_path):
    f = tmp_path / "sessions" / "--p--" / "x.jsonl"
    assert agent_dir_for_session_file(f) == tmp_path
    assert agent_dir_for_session_file(tmp_path / "x.jsonl") is None


def test_ids():
    ids = {new_entry_id(set()) for _ in range(200)}
    assert all(re.fullmatch(r"[0-9a-f]{8}", i) for i in ids)
    taken = {"00000000"}
    assert new_entry_id(taken) not in taken
    sid = new_session_id()
    assert re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}", sid)


def test_times_round_trip():
    iso = now_iso()
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", iso)
    assert ms_to_iso(iso_to_ms(iso)) == iso
    assert iso_to_ms("2025-12-08T22:41:05.306Z") == 1765233665306
    assert iso_to_ms("nonsense") is None
    assert iso_to_ms(None) is None


def _iso_to_ms_reference(iso: object) -> int | None:
    """iso_to_ms as it was before its fast path: a final Z made +00:00 first."""
    if not isinstance(iso, str) or not iso:
        return None
    text = iso[:-1] + "+00:00" if iso.endswith("Z") else iso
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return round(moment.timestamp() * 1000)


@settings(max_examples=400, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [
                "2026-01-01",
                "20260101",
                "2026-W01-1",
                "T",
                " ",
                "00",
                ":00",
                "00:00",
                ".5",
                ".1234567",
                "Z",
                "z",
                "+01:00",
                "-00:00",
                "+0100",
                "24:00:00",
                "x",
                "",
            ]
        ),
        max_size=6,
    ).map("".join)
)
def test_iso_to_ms_reads_as_before(iso: str) -> None:
    assert iso_to_ms(iso) == _iso_to_ms_reference(iso)


def test_terminal_id():
    assert terminal_id({}, "/dev/pts/3") == "pts-3"
    assert terminal_id({"KITTY_WINDOW_ID": "7"}, None) == "kitty-7"
    assert terminal_id({"TMUX_PANE": "%1"}, None) == "tmux-%1"
    assert terminal_id({"TERM_SESSION_ID": "w0t0p0:AB/C"}, None) == "apple-w0t0p0:AB-C"
    assert terminal_id({"WT_SESSION": "g"}, None) == "wt-g"
    assert terminal_id({}, None) is None
