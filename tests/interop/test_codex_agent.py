"""The real Codex CLI as a test client: one ``codex exec`` turn against the fake
Responses API server runs a shell command the model asked for, writes a rollout
holding the call, its output and the scripted answer, and sends the model the call's
output on its next request. If this fails, every real-Codex test would fail for a
reason that has nothing to do with sessionfs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from support.fake_responses_server import FakeResponsesServer, FunctionCall
from support.real_agents import CODEX_VERSION, CodexAgent, rollout_thread_id

Json = dict[str, Any]


def rollout_lines(path: Path) -> list[Json]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_codex_exec_runs_a_shell_call(
    codex_agent: CodexAgent, fake_responses: FakeResponsesServer, tmp_path: Path
) -> None:
    fake_responses.reply_with(
        FunctionCall("exec_command", {"cmd": "echo shell-said-hi"}), "the shell said hi"
    )
    result = codex_agent.run("say hi through the shell", cwd=tmp_path / "work").check()
    assert "the shell said hi" in result.stdout

    first, second = fake_responses.requests
    assert first.path.endswith("/v1/responses") and first.body["stream"] is True
    assert first.messages[-1]["content"] == [
        {"type": "input_text", "text": "say hi through the shell"}
    ]
    (output,) = second.items("function_call_output")
    assert "shell-said-hi" in output["output"]

    (rollout,) = codex_agent.sessions()
    lines = rollout_lines(rollout)
    assert lines[0]["type"] == "session_meta"
    assert lines[0]["payload"]["cli_version"] == CODEX_VERSION
    assert rollout_thread_id(rollout) == lines[0]["payload"]["id"]
    items = [line["payload"] for line in lines if line["type"] == "response_item"]
    (call,) = [item for item in items if item["type"] == "function_call"]
    assert call["name"] == "exec_command"
    assert json.loads(call["arguments"]) == {"cmd": "echo shell-said-hi"}
    assert items[-1]["role"] == "assistant"
    assert items[-1]["content"][0]["text"] == "the shell said hi"
