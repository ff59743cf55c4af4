"""The real-agent harness itself: one turn of the real pi, omp and Claude Code against
a fake model server writes a session file whose last assistant message is the scripted
reply, and the server saw the prompt. If these fail, every real-agent test would fail
for a reason that has nothing to do with sessionfs."""

from __future__ import annotations

import json
import threading
import urllib.request
from pathlib import Path
from typing import Any

from support.agent_files import last_assistant_text, lines_of
from support.fake_anthropic_server import FakeAnthropicServer, tool_use
from support.fake_model_server import FakeModelServer, ModelRequest
from support.real_agents import ClaudeAgent, OmpAgent, PiAgent

Json = dict[str, Any]


def turn_request(fake_model: FakeModelServer, prompt: str) -> ModelRequest:
    """The one request of the main turn (side calls, if any, do not carry the prompt)."""
    (request,) = [r for r in fake_model.requests if r.mentions(prompt)]
    return request


def test_pi_one_turn(pi_agent: PiAgent, fake_model: FakeModelServer, tmp_path: Path) -> None:
    fake_model.reply_with("pi heard you")
    session = tmp_path / "pi-session.jsonl"
    result = pi_agent.run("what is a session file", session=session, cwd=tmp_path / "work").check()
    assert "pi heard you" in result.stdout
    assert last_assistant_text(session) == "pi heard you"
    assert lines_of(session)[0]["type"] == "session"  # pi 0.73 writes no title slot
    request = turn_request(fake_model, "what is a session file")
    assert request.messages[-1]["role"] == "user"

    # A second turn continues the same file: the model sees the first exchange.
    fake_model.reply_with("second answer")
    pi_agent.run("and another question", session=session, cwd=tmp_path / "work").check()
    assert last_assistant_text(session) == "second answer"
    texts = turn_request(fake_model, "and another question").texts()
    assert "pi heard you" in texts and "what is a session file" in texts


def test_omp_one_turn(omp_agent: OmpAgent, fake_model: FakeModelServer, tmp_path: Path) -> None:
    fake_model.set_default_reply("omp heard you")
    result = omp_agent.run("explain the session directory layout", cwd=tmp_path / "work").check()
    assert "omp heard you" in result.stdout
    (session,) = omp_agent.sessions()
    first = session.read_bytes().split(b"\n", 1)[0]
    assert len(first) + 1 == 256 and json.loads(first)["type"] == "title"  # omp 18's slot
    assert lines_of(session)[1]["type"] == "session"
    assert last_assistant_text(session) == "omp heard you"
    turn_request(fake_model, "explain the session directory layout")

    # --resume continues that file.
    fake_model.set_default_reply("omp again")
    omp_agent.run("a follow-up question", session=session, cwd=tmp_path / "work").check()
    assert omp_agent.sessions() == [session]
    assert last_assistant_text(session) == "omp again"
    texts = turn_request(fake_model, "a follow-up question").texts()
    assert "omp heard you" in texts


def _post_chat(url: str, body: Json) -> bytes:
    request = urllib.request.Request(
        f"{url}/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return bytes(response.read())


def test_fake_model_holds_replies_until_released() -> None:
    """What the tests that act while an agent waits for its model rely on."""
    with FakeModelServer() as server:
        answers: list[bytes] = []
        with server.hold():
            body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
            caller = threading.Thread(target=lambda: answers.append(_post_chat(server.url, body)))
            caller.start()
            (seen,) = server.wait_for_requests(1, timeout=30)
            assert seen.texts() == ["hi"]
            caller.join(timeout=0.3)
            assert caller.is_alive() and not answers  # held
        caller.join(timeout=30)
        (answer,) = answers
        events = [line for line in answer.decode().splitlines() if line.startswith("data: ")]
        assert events[-1] == "data: [DONE]"
        text = "".join(
            choice["delta"].get("content", "")
            for event in events[:-1]
            for choice in json.loads(event[len("data: ") :])["choices"]
        )
        assert text == "fake reply"
        plain = json.loads(_post_chat(server.url, {"model": "m", "messages": []}))
        assert plain["choices"][0]["message"]["content"] == "fake reply"
        with urllib.request.urlopen(f"{server.url}/models", timeout=30) as response:
            assert [m["id"] for m in json.loads(response.read())["data"]] == ["fake-model"]


def test_claude_code_one_turn_and_a_tool_call(
    claude_agent: ClaudeAgent, fake_anthropic: FakeAnthropicServer, tmp_path: Path
) -> None:
    """The real Claude Code against the fake Anthropic server: a tool call is run and
    its result sent back, the session file holds the scripted reply, and a resumed
    turn continues the same file with the first exchange in its request."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "notes.txt").write_text("the notes say hello\n")
    fake_anthropic.reply_with(
        [tool_use("Bash", {"command": "cat notes.txt", "description": "show notes"})],
        "the notes greet you",
    )
    first = claude_agent.turn("read my notes", work)
    assert first.result == "the notes greet you"
    (session,) = claude_agent.sessions()
    assert session.stem == first.session_id
    after_tool = fake_anthropic.requests[1].messages
    results = [
        block
        for message in after_tool
        for block in message["content"]
        if isinstance(block, dict) and block.get("type") == "tool_result"
    ]
    assert "the notes say hello" in json.dumps(results)
    said = [
        block["text"]
        for line in lines_of(session)
        if line["type"] == "assistant"
        for block in line["message"]["content"]
        if block["type"] == "text"
    ]
    assert said[-1] == "the notes greet you"

    fake_anthropic.reply_with("second answer")
    again = claude_agent.turn("and now?", work, resume=first.session_id)
    assert again.session_id == first.session_id and claude_agent.sessions() == [session]
    texts = " ".join(json.dumps(m["content"]) for m in fake_anthropic.requests[-1].messages)
    assert "read my notes" in texts and "the notes greet you" in texts
