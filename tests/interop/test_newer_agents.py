"""The real GitHub Copilot CLI 1.0.102 and opencode 1.18.33, offline against the fake
model server: a turn with a tool call, a continued session (and an opencode fork), then
the session as core reads it compared with what the agent sent the model on its next
request -- ``context.json`` must be exactly the conversation the model saw."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from support.fake_model_server import FakeModelServer, ModelRequest, ToolCall
from support.newer_agent_files import chat_view
from support.real_agents import (
    CopilotAgent,
    OpencodeAgent,
)

from core.formats.copilot import CopilotSession
from core.formats.copilot_agent import list_copilot_sessions
from core.formats.opencode import OpencodeSession
from core.formats.opencode_dirs import list_sessions
from core.paths import encode_cwd

#: a real run takes 1-5 s here; generous for a loaded machine
TIMEOUT_S = 120


def tool_then_text(prompt: str, tool: str, command: str) -> Callable[[ModelRequest], object]:
    """The model's script: a tool call on the turn that asks ``prompt`` (before any
    tool result), then text naming how many messages it was sent."""

    def reply(request: ModelRequest) -> object:
        last = request.messages[-1] if request.messages else {}
        if request.body.get("tools") and last.get("role") == "user" and prompt in str(last):
            return ToolCall(tool, {"command": command, "description": "run it"})
        return f"answer after {len(request.messages)} messages"

    return reply


def main_requests(server: FakeModelServer) -> list[ModelRequest]:
    """The requests of the conversation (with tools), not side calls such as titles."""
    return [r for r in server.requests if r.body.get("tools")]


@pytest.fixture
def copilot(tmp_path: Path, fake_model: FakeModelServer, copilot_install: Path) -> CopilotAgent:
    return CopilotAgent.at_home(tmp_path / "home", fake_model.url, "fake-model", copilot_install)


@pytest.fixture
def opencode(tmp_path: Path, fake_model: FakeModelServer, opencode_install: Path) -> OpencodeAgent:
    return OpencodeAgent.at_home(tmp_path / "home", fake_model.url, "fake-model", opencode_install)


def test_copilot_context_is_what_the_model_is_sent_next(
    copilot: CopilotAgent, fake_model: FakeModelServer, tmp_path: Path
) -> None:
    fake_model.set_default_reply(tool_then_text("count the files", "bash", "echo tool-out-7"))
    work = tmp_path / "home" / "work"
    copilot.run("count the files", cwd=work, timeout=TIMEOUT_S).check()
    (events,) = copilot.sessions()
    session = CopilotSession(events)
    context = session.context()
    assert context["model"] == "fake-model"
    tool_results = [m for m in context["messages"] if m["role"] == "tool"]
    assert len(tool_results) == 1 and "tool-out-7" in tool_results[0]["content"]

    copilot.run("and now?", cwd=work, options=["--continue"], timeout=TIMEOUT_S).check()
    assert copilot.sessions() == [events]  # continued, not a new session
    sent = main_requests(fake_model)[-1].messages
    assert sent[-1]["role"] == "user" and "and now?" in sent[-1]["content"]
    assert chat_view(context["messages"]) == chat_view(sent[:-1])

    assert session.catch_up()
    again = session.context()["messages"]
    assert chat_view(again[: len(sent)]) == chat_view(sent)
    assert again[-1]["role"] == "assistant"
    names = [m.message["role"] for m in session.transcript_messages()]
    assert names == ["user", "assistant", "toolResult", "assistant", "user", "assistant"]
    header = session.header()
    assert header["copilotVersion"] == "1.0.102" and header["cwd"] == str(work)
    assert session.title() == "count the files"
    (listed,) = list_copilot_sessions(copilot.agent_dir)
    assert listed.project == encode_cwd(str(work)) and listed.stem == header["id"]

    # /compact: the model is sent one user message in place of the history (the
    # prompts typed so far and the summary it wrote); context.json says the same.
    # (A run after a compaction writes a new system prompt: compared after the run.)
    fake_model.set_default_reply("the summary so far")
    copilot.run("/compact", cwd=work, options=["--continue"], timeout=TIMEOUT_S).check()
    copilot.run("after the compaction", cwd=work, options=["--continue"], timeout=TIMEOUT_S)
    sent = main_requests(fake_model)[-1].messages
    assert "after the compaction" in sent[-1]["content"] and len(sent) == 3
    assert session.catch_up()
    compacted = session.context()["messages"]
    assert chat_view(compacted[:3]) == chat_view(sent)
    assert "the summary so far" in compacted[1]["content"]
    assert "<user_message>\nand now?\n</user_message>" in compacted[1]["content"]


def test_opencode_context_is_what_the_model_is_sent_next_and_a_fork(
    opencode: OpencodeAgent, fake_model: FakeModelServer, tmp_path: Path
) -> None:
    fake_model.set_default_reply(tool_then_text("count the files", "bash", "echo tool-out-9"))
    work = tmp_path / "home" / "work"
    opencode.run("count the files", cwd=work, timeout=TIMEOUT_S).check()
    (info,) = list_sessions(opencode.agent_dir).sessions
    assert info.in_db and info.directory == str(work) and info.store == opencode.database()
    session = OpencodeSession(info.store, info.id)
    context = session.context()
    assert context["model"] == "fake/fake-model"

    opencode.run("and now?", cwd=work, options=["--continue"], timeout=TIMEOUT_S).check()
    sent = main_requests(fake_model)[-1].messages
    assert sent[0]["role"] == "system"  # opencode stores no system prompt
    assert chat_view(context["messages"]) == chat_view(sent[1:-1])
    assert "and now?" in sent[-1]["content"]
    assert session.catch_up()
    assert chat_view(session.context()["messages"][: len(sent) - 1]) == chat_view(sent[1:])
    roles = [m.message["role"] for m in session.transcript_messages()]
    assert roles == ["user", "assistant", "toolResult", "assistant", "user", "assistant"]

    # A fork copies the messages under new ids into a session of its own.
    opencode.run(
        "forked question", cwd=work, options=["--session", info.id, "--fork"], timeout=TIMEOUT_S
    ).check()
    listing = list_sessions(opencode.agent_dir)
    forks = [s for s in listing.sessions if s.id != info.id]
    assert len(forks) == 1 and listing.skipped == {}
    fork = OpencodeSession(forks[0].store, forks[0].id)
    sent = main_requests(fake_model)[-1].messages
    assert "forked question" in sent[-1]["content"]
    assert chat_view(fork.context()["messages"][: len(sent) - 1]) == chat_view(sent[1:])
    assert not {fork.entry_name(i) for i in range(len(fork))} & {
        session.entry_name(i) for i in range(len(session))
    }
    assert json.loads(fork.raw_line(0))["kind"] == "message"
