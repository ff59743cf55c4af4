"""The real Gemini CLI 0.61, offline against a fake Gemini API, and its sessions under
``agents/gemini/`` of a real mount.

One session of three runs: a first turn, a resumed turn in which the model calls the
shell tool and then a sub-agent, and a third resumed turn. Then the mount, and a fourth
run: what it sends the model is the conversation Gemini loaded back from its own file,
and the ``context.json`` the mount showed before it must be exactly that, less what
Gemini adds on the wire (its fresh ``<session_context>``, ``thoughtSignature`` markers,
call ids without their ``<tool name>__`` prefix). Before it: ``transcript.md``,
``entries/``, ``leaf``, ``header.json``, ``subagents/``, ``transcripts/``, ``search/`` and
read-only-ness, with real tools.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from support.fake_gemini_server import (
    GEMINI_MODEL,
    FakeGeminiServer,
    FunctionCall,
    contents_of,
)
from support.fake_model_server import ModelRequest
from support.file_snapshot import fingerprint
from support.mount import Mount, MountFactory, run
from support.other_agents import home_env
from support.real_agents import GeminiAgent
from support.waiting import agent_search_ready
from support.write_setup import drop, errno_of, read_ctl

pytestmark = pytest.mark.fuse

MARKER = "tool-output-42"


@dataclass
class Recorded:
    agent: GeminiAgent
    workdir: Path
    #: the session's file (a resume in another minute adds a file without conversation)
    file: Path
    #: still serving: the test resumes the session once more
    server: FakeGeminiServer


SHELL = FunctionCall("run_shell_command", {"command": f"echo {MARKER}"})
#: Gemini's sub-agent tool, asking its generalist agent (which ends with `DONE`)
DELEGATE = FunctionCall("invoke_agent", {"agent_name": "generalist", "prompt": "look around"})
DONE = FunctionCall("complete_task", {"result": {"response": "the sub-agent looked"}})
ANSWERS = {
    "hello there": "first answer",
    "run the echo": SHELL,
    "third prompt": "third answer",
    "fourth prompt": "fourth answer",
}
AFTER_TOOL = {"run_shell_command": DELEGATE, "invoke_agent": "done with tool"}


def _script(request: ModelRequest) -> str | FunctionCall:
    """The model's side of the conversation: an answer to each prompt; in the second
    run the shell tool, then a sub-agent, then the end of the turn; the sub-agent
    (offered ``complete_task``) completes at once."""
    tools = [
        d.get("name") for t in request.body.get("tools") or [] for d in t["functionDeclarations"]
    ]
    if "complete_task" in tools:
        return DONE
    last = (contents_of(request) or [{}])[-1].get("parts") or [{}]
    answered = last[-1].get("functionResponse")
    if answered is not None:
        return AFTER_TOOL.get(answered.get("name"), "noted")
    return ANSWERS.get(str(last[-1].get("text")), "noted")


@pytest.fixture
def recorded(gemini_install: Path, tmp_path: Path) -> Iterator[Recorded]:
    with FakeGeminiServer() as server:
        server.set_default_reply(_script)
        agent = GeminiAgent.at_home(tmp_path / "home", server.url, GEMINI_MODEL, gemini_install)
        workdir = tmp_path / "work" / "webapp"
        agent.run("hello there", cwd=workdir).check()
        [file] = agent.sessions()
        yolo = ["--approval-mode", "yolo"]
        agent.run("run the echo", session=file, cwd=workdir, options=yolo).check()
        agent.run("third prompt", session=file, cwd=workdir).check()
        yield Recorded(agent, workdir, file, server)


def _strip_call_prefix(part: dict[str, Any]) -> None:
    """Gemini sends a call id without the ``<tool name>__`` prefix it stores."""
    for key in ("functionCall", "functionResponse"):
        call = part.get(key)
        if isinstance(call, dict) and str(call.get("id", "")).startswith(f"{call.get('name')}__"):
            call["id"] = call["id"][len(call["name"]) + 2 :]


def _as_sent(contents: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``contents`` with the wire's own additions taken out (module docstring)."""
    kept = []
    for content in copy.deepcopy(contents):
        parts = []
        for part in content.get("parts") or []:
            if str(part.get("text", "")).startswith("<session_context>"):
                continue
            part.pop("thoughtSignature", None)
            _strip_call_prefix(part)
            parts.append(part)
        if parts:
            kept.append({"role": content["role"], "parts": parts})
    return kept


def _mounted(recorded: Recorded, mount_factory: MountFactory, tmp_path: Path) -> Mount:
    empty = tmp_path / "xcsh-agent"
    (empty / "sessions").mkdir(parents=True)
    return mount_factory(empty, "--agents", "gemini", env=home_env(recorded.agent.home))


def test_real_gemini_session_through_the_mount(
    recorded: Recorded, mount_factory: MountFactory, tmp_path: Path
) -> None:
    file = recorded.file
    before = fingerprint(recorded.agent.agent_dir)
    mount = _mounted(recorded, mount_factory, tmp_path)
    agents = mount.path / "agents"
    assert run("ls", agents).split() == ["gemini"]  # found in ~/.gemini, chosen by --agents
    [project] = run("ls", agents / "gemini" / "sessions").split()
    assert project == "webapp"  # projects.json's short name for the cwd
    stem = file.name.removesuffix(".jsonl")
    listed = run("ls", agents / "gemini" / "sessions" / project).split()
    assert stem in listed and listed == [
        p.name.removesuffix(".jsonl") for p in recorded.agent.sessions()
    ]
    session = agents / "gemini" / "sessions" / project / stem

    context = json.loads(run("cat", session / "context.json"))
    assert context["model"] == GEMINI_MODEL
    assert context["messages"][-1] == {"role": "model", "parts": [{"text": "third answer"}]}
    # a tool's result goes to the model more than once (Gemini's own loader, and each
    # resume's rewrite of the list): shown as it is
    responses = [p for c in context["messages"] for p in c["parts"] if "functionResponse" in p]
    names = [p["functionResponse"]["name"] for p in responses]
    assert names.count("run_shell_command") >= 2 and names.count("invoke_agent") >= 2
    assert any(MARKER in json.dumps(r) for r in responses)
    assert any("the sub-agent looked" in json.dumps(r) for r in responses)

    transcript = run("cat", session / "transcript.md")
    order = ["hello there", "first answer", "run the echo", f"echo {MARKER}", "done with tool"]
    order += ["third prompt", "third answer"]
    positions = [transcript.index(text) for text in order]
    assert positions == sorted(positions), transcript
    assert transcript.count(f"Output: {MARKER}") == 1  # one result, shown once

    lines = file.read_bytes().splitlines()
    entries = sorted(run("ls", session / "entries").split())
    assert len(entries) == len(lines)
    assert json.loads(run("cat", session / "entries" / entries[2])) == json.loads(lines[2])
    assert run("readlink", session / "leaf").strip() == f"entries/{entries[-1]}"
    header = json.loads(run("cat", session / "header.json"))
    assert header["agent"] == "gemini" and header["cwd"] == str(recorded.workdir)
    assert header["id"] == json.loads(lines[0])["sessionId"]

    [sub] = run("ls", session / "subagents").split()  # chats/<session id>/<sub id>.jsonl
    assert json.loads(run("cat", session / "subagents" / sub / "header.json"))["kind"] == "subagent"
    sub_transcript = run("cat", session / "subagents" / sub / "transcript.md")
    assert "look around" in sub_transcript and "the sub-agent looked" in sub_transcript

    assert run("grep", "-rl", "third answer", agents / "gemini" / "transcripts").strip()
    agent_search_ready(mount.path, "gemini")
    hits = run("cat", mount.path / "search" / MARKER).splitlines()
    paths = [hit.split("\t")[1] for hit in hits]
    assert paths and all(p.startswith(f"agents/gemini/sessions/{project}/{stem}/") for p in paths)
    assert all(MARKER in (mount.path / p).read_text() for p in paths)

    assert errno_of(lambda: drop(session, "title", b"renamed\n")) == 30  # EROFS
    assert "read-only" in str(read_ctl(mount.path)["last_error"])
    assert fingerprint(recorded.agent.agent_dir) == before  # nothing of Gemini's written

    # what Gemini sends when it resumes the session next is what context.json showed
    recorded.server.clear_requests()
    recorded.agent.run("fourth prompt", session=file, cwd=recorded.workdir).check()
    [fourth] = recorded.server.turns()
    sent = contents_of(fourth)
    assert sent[-1] == {"role": "user", "parts": [{"text": "fourth prompt"}]}
    assert _as_sent(context["messages"]) == _as_sent(sent[:-1])
