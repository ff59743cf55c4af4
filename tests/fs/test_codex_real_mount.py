"""What the mount shows of sessions the real Codex CLI (`support.real_agents.CodexAgent`,
the pinned 0.171.0) wrote, against the fake Responses API server that records what
Codex sent the model.

One story, run once for the module (a handful of ``codex exec`` runs, ~1 s each): an
image, reasoning, a shell call and ``view_image`` in the first turn (the mount read
while Codex waits for the model), ``exec resume --last``, a turn that starts with an
automatic compaction (a low ``model_auto_compact_token_limit`` and a reply that reports
many tokens), ``exec fork``, the parent resumed after the fork, and a sub-agent the
parent spawns and waits for. Between runs the test reads ``context.json`` through the
mount; the next request Codex sends must carry exactly those items (after its base
instructions, ``input[0]``, which Codex builds anew for each request and never writes
to the rollout), then the new prompt.
"""

from __future__ import annotations

import base64
import io
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from support.fake_model_server import DEFAULT_MODEL
from support.fake_responses_server import (
    Answer,
    FakeResponsesServer,
    FunctionCall,
    Output,
    Reasoning,
    ResponsesRequest,
    Usage,
)
from support.mount import Mount, run, start_mount
from support.real_agents import (
    CODEX_VERSION,
    RUN_TIMEOUT_S,
    AgentResult,
    CodexAgent,
    finish,
    kill,
    rollout_thread_id,
)
from support.waiting import eventually

from core.formats.codex import reads_line, split_line
from sessionfs.view.agent_sources import open_agent_file
from sessionfs.view.renderings import render_source
from sessionfs.view.streamed_files import STREAMED, open_streamed

pytestmark = pytest.mark.fuse

Json = dict[str, Any]

PROMPT_1 = "look at the picture and run a command"
THOUGHT = "**Running** the command first"
COMMAND = "echo shell-said-$((40 + 2))"
#: what the command prints: not a text of the call itself
SHELL_SAID = "shell-said-42"
ANSWER_1 = "the picture is one pixel"
PROMPT_2 = "what colour is that pixel"
ANSWER_2 = "a greyish blue"
PROMPT_3 = "carry on after the checkpoint"
SUMMARY = "we looked at a one pixel picture"
ANSWER_3 = "carrying on from the summary"
FORK_PROMPT = "take the other road"
FORK_ANSWER = "the other road it is"
PROMPT_4 = "back on the main line"
ANSWER_4 = "main line again"
PROMPT_5 = "ask a helper to count"
SUB_TASK = "count to three for me"
SUB_ANSWER = "one two three"
ANSWER_5 = "the helper counted"
#: every text of the conversation: what a line the reader maps to nothing must not hold
CONVERSATION = (
    PROMPT_1,
    THOUGHT,
    SHELL_SAID,
    ANSWER_1,
    PROMPT_2,
    ANSWER_2,
    PROMPT_3,
    SUMMARY,
    ANSWER_3,
    FORK_PROMPT,
    FORK_ANSWER,
    PROMPT_4,
    ANSWER_4,
    PROMPT_5,
    SUB_TASK,
    SUB_ANSWER,
    ANSWER_5,
)
#: a 1x1 PNG (70 bytes)
PIXEL = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)
COMPACT_LIMIT = 10_000
#: the tool namespace Codex offers its sub-agent tools in
MULTI_AGENT = "multi_agent_v1"
#: what the fake model reports for the answer that makes the next turn compact first
BIG_USAGE = Usage(input_tokens=50_000, cached_input_tokens=20_000, output_tokens=30)


@dataclass
class Story:
    mount: Mount
    agent: CodexAgent
    parent_id: str
    fork_id: str = ""
    sub_id: str = ""
    #: ``context.json`` messages read through the mount after each step
    contexts: dict[str, list[Json]] = field(default_factory=dict)
    #: the requests Codex sent in each step, in order
    sent: dict[str, list[ResponsesRequest]] = field(default_factory=dict)

    def session(self, thread_id: str) -> Path:
        if thread_id == self.sub_id:  # below its parent, once the listing has it
            subagents = self.session(self.parent_id) / "subagents"
            eventually(lambda: any(subagents.iterdir()), "the sub-agent listed", within=30)
            (sub,) = subagents.iterdir()
            return sub
        return self.mount.path / "agents" / "codex" / "by-id" / thread_id

    def rollout(self, thread_id: str) -> Path:
        (path,) = [p for p in self.agent.sessions() if rollout_thread_id(p) == thread_id]
        return path

    def usage_sent(self, request: ResponsesRequest) -> Usage:
        return BIG_USAGE if request is self.sent["2"][0] else Usage()

    def thread_ids(self) -> set[str]:
        return {self.parent_id, self.fork_id, self.sub_id} - {""}

    def steps_of(self, thread_id: str) -> list[ResponsesRequest]:
        """Every request sent for ``thread_id``."""
        requests = [r for step in self.sent.values() for r in step]
        return [r for r in requests if r.thread_id == thread_id]


def item_text(item: Json) -> str:
    content = item.get("content")
    if not isinstance(content, list):
        return ""
    return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))


def sent(request: ResponsesRequest) -> list[Json]:
    """The history Codex sent: ``input`` after its base instructions (``input[0]``)."""
    first = request.messages[0]
    assert first["role"] == "developer" and item_text(first).startswith("You are")
    return request.messages[1:]


def mounted_context(session: Path) -> list[Json]:
    messages = json.loads((session / "context.json").read_text())["messages"]
    assert isinstance(messages, list)
    return messages


def context_ending_with(session: Path, text: str, role: str = "assistant") -> list[Json]:
    """The session's ``context.json`` messages once the last one is ``role``'s and ends
    with ``text`` (the mount shows a changed file within a few seconds, not at once)."""
    found: list[list[Json]] = []

    def shows() -> bool:
        if not (session / "context.json").exists():
            return False
        found[:] = [mounted_context(session)]
        last = found[0][-1] if found[0] else {}
        return last.get("role") == role and item_text(last).endswith(text)

    eventually(shows, f"{session.name}'s context ending with {text!r}", within=30)
    return found[0]


def assert_reply_follows(context: list[Json], request: ResponsesRequest, answer: str) -> None:
    """``context`` is what ``request`` sent, then the assistant's ``answer``: nothing
    left out, nothing added, nothing twice."""
    history = sent(request)
    assert context[: len(history)] == history
    (reply,) = context[len(history) :]
    assert reply["role"] == "assistant" and item_text(reply) == answer


def assert_sent_after(before: list[Json], request: ResponsesRequest, prompt: str) -> None:
    """The mount's ``before`` was exactly what ``request`` sent ahead of ``prompt``."""
    history = sent(request)
    assert history[:-1] == before
    assert history[-1]["role"] == "user" and item_text(history[-1]) == prompt


@pytest.fixture(scope="module")
def story(codex_install: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Story]:
    tmp = tmp_path_factory.mktemp("codex-real")
    work = tmp / "work"
    work.mkdir()
    (work / "pixel.png").write_bytes(PIXEL)
    (tmp / "agent").mkdir()
    with FakeResponsesServer() as server:
        agent = CodexAgent(
            tmp / "home",
            tmp / "home" / ".codex",
            server.url,
            DEFAULT_MODEL,
            codex_install,
            auto_compact_tokens=COMPACT_LIMIT,
        ).configure()
        mount = start_mount(tmp / "agent", tmp / "mnt", "--codex-dir", str(agent.agent_dir))
        try:
            yield _tell(agent, server, mount, work)
        finally:
            mount.unmount()


def _tell(agent: CodexAgent, server: FakeResponsesServer, mount: Mount, work: Path) -> Story:
    # turn 1: reasoning and a shell call, then a look at the picture, then the answer
    server.reply_with(
        Answer([Reasoning(THOUGHT), FunctionCall("exec_command", {"cmd": COMMAND})]),
        FunctionCall("view_image", {"path": str(work / "pixel.png")}),
        ANSWER_1,
    )
    with server.hold():  # read the mount while Codex waits for its first reply
        process = agent.start(PROMPT_1, cwd=work, options=["-i", str(work / "pixel.png")])
        try:
            server.wait_for_requests(1, timeout=RUN_TIMEOUT_S)
            (rollout,) = agent.sessions()
            story = Story(mount, agent, rollout_thread_id(rollout))
            parent = story.session(story.parent_id)
            story.contexts["held"] = context_ending_with(parent, PROMPT_1, "user")
        except BaseException:
            kill(process)
            raise
    finish(process).check()
    story.contexts["1"] = context_ending_with(parent, ANSWER_1)
    story.sent["1"] = server.requests

    def step(name: str, run: Callable[[], AgentResult], session: Path, answer: str) -> None:
        before = len(server.requests)
        run().check()
        story.contexts[name] = context_ending_with(session, answer)
        story.sent[name] = server.requests[before:]

    server.reply_with(Answer([ANSWER_2], BIG_USAGE))
    step("2", lambda: agent.resume(None, PROMPT_2, cwd=work), parent, ANSWER_2)
    server.reply_with(SUMMARY, ANSWER_3)  # the compaction's request, then the turn's
    step("3", lambda: agent.resume(story.parent_id, PROMPT_3, cwd=work), parent, ANSWER_3)

    server.reply_with(FORK_ANSWER)
    before = len(server.requests)
    agent.fork(story.parent_id, FORK_PROMPT, cwd=work).check()
    (fork_rollout,) = [p for p in agent.sessions() if p != rollout]
    story.fork_id = rollout_thread_id(fork_rollout)
    story.contexts["fork"] = context_ending_with(story.session(story.fork_id), FORK_ANSWER)
    story.sent["fork"] = server.requests[before:]

    server.reply_with(ANSWER_4)
    step("4", lambda: agent.resume(story.parent_id, PROMPT_4, cwd=work), parent, ANSWER_4)

    # a sub-agent: the parent spawns one, which answers (its requests may come
    # between the parent's), then waits for it and answers itself
    server.set_default_reply(partial(_delegating, story))
    step("5", lambda: agent.resume(story.parent_id, PROMPT_5, cwd=work), parent, ANSWER_5)
    (sub,) = [p for p in agent.sessions() if rollout_thread_id(p) not in story.thread_ids()]
    story.sub_id = rollout_thread_id(sub)
    story.contexts["sub"] = context_ending_with(story.session(story.sub_id), SUB_ANSWER)
    return story


def _delegating(story: Story, request: ResponsesRequest) -> Output:
    """The model's replies in step 5, by thread and by what the thread has seen."""
    if request.thread_id != story.parent_id:
        return SUB_ANSWER
    calls = {call["name"]: call["call_id"] for call in request.items("function_call")}
    if "wait_agent" in calls:
        return ANSWER_5
    if "spawn_agent" not in calls:
        return FunctionCall("spawn_agent", {"message": SUB_TASK}, namespace=MULTI_AGENT)
    outputs = {out["call_id"]: out["output"] for out in request.items("function_call_output")}
    spawned = json.loads(outputs[calls["spawn_agent"]])
    wait = {"targets": [spawned["agent_id"]], "timeout_ms": 60_000}
    return FunctionCall("wait_agent", wait, namespace=MULTI_AGENT)


def test_context_is_what_codex_sends_next(story: Story) -> None:
    counts = {name: len(requests) for name, requests in story.sent.items()}
    assert counts == {"1": 3, "2": 1, "3": 2, "fork": 1, "4": 1, "5": 4}
    assert {r.thread_id for r in story.sent["fork"]} == {story.fork_id}
    assert len(story.steps_of(story.parent_id)) == 10
    first, second, third = story.sent["1"]
    # while Codex waits for its first reply, the mount shows exactly what it sent
    assert story.contexts["held"] == sent(first)
    # turn 1: the image and the prompt, reasoning, a shell call and its output, a
    # look at the picture (an image as a tool's output), the answer
    assert sent(second)[: len(sent(first))] == sent(first)
    assert sent(third)[: len(sent(second))] == sent(second)
    assert_reply_follows(story.contexts["1"], third, ANSWER_1)
    context = story.contexts["1"]
    (thought,) = [item for item in context if item["type"] == "reasoning"]
    assert thought["summary"][0]["text"] == THOUGHT and thought["encrypted_content"]
    shell, look = [item for item in context if item["type"] == "function_call"]
    assert json.loads(shell["arguments"]) == {"cmd": COMMAND}
    shell_out, look_out = [item for item in context if item["type"] == "function_call_output"]
    assert SHELL_SAID in shell_out["output"] and shell_out["call_id"] == shell["call_id"]
    assert look["name"] == "view_image" and look_out["call_id"] == look["call_id"]
    assert look_out["output"][0]["type"] == "input_image"
    (prompt,) = [item for item in context if PROMPT_1 in item_text(item)]
    image = [part for part in prompt["content"] if part["type"] == "input_image"]
    assert image and image[0]["image_url"].startswith("data:image/png;base64,")
    # exec resume --last: the same history, then the new prompt
    (second_turn,) = story.sent["2"]
    assert_sent_after(story.contexts["1"], second_turn, PROMPT_2)
    assert_reply_follows(story.contexts["2"], second_turn, ANSWER_2)
    # the next turn compacts first: its compaction request carried the same history
    compaction, third_turn = story.sent["3"]
    assert sent(compaction)[:-1] == story.contexts["2"]
    assert "CONTEXT CHECKPOINT COMPACTION" in item_text(sent(compaction)[-1])
    # ... and the turn itself was sent the compacted history the mount shows
    assert_reply_follows(story.contexts["3"], third_turn, ANSWER_3)
    assert any(SUMMARY in item_text(item) for item in story.contexts["3"])
    assert not any(ANSWER_1 in item_text(item) for item in story.contexts["3"])
    # the fork copies none of its parent's items, yet it is sent the parent's history
    (fork_turn,) = story.sent["fork"]
    assert_sent_after(story.contexts["3"], fork_turn, FORK_PROMPT)
    assert_reply_follows(story.contexts["fork"], fork_turn, FORK_ANSWER)
    # the parent goes on from where it was; the fork keeps the parent's past only
    (fourth_turn,) = story.sent["4"]
    assert_sent_after(story.contexts["3"], fourth_turn, PROMPT_4)
    assert_reply_follows(story.contexts["4"], fourth_turn, ANSWER_4)
    assert mounted_context(story.session(story.fork_id)) == story.contexts["fork"]
    # a sub-agent: its own session (below its parent's) shows what it was sent; the
    # parent's shows the spawn, the wait, Codex's notice and the answer, as sent
    spawn, wait, last = [r for r in story.sent["5"] if r.thread_id == story.parent_id]
    (helper,) = story.steps_of(story.sub_id)
    assert_sent_after(story.contexts["4"], spawn, PROMPT_5)
    assert sent(wait)[: len(sent(spawn))] == sent(spawn)
    assert_reply_follows(story.contexts["5"], last, ANSWER_5)
    assert any("<subagent_notification>" in item_text(item) for item in sent(last))
    assert item_text(sent(helper)[-1]) == SUB_TASK
    assert_reply_follows(story.contexts["sub"], helper, SUB_ANSWER)


def _positions(transcript: str, texts: list[str]) -> list[int]:
    """Where each text is in the transcript's sections (after its title line), each
    there exactly once."""
    transcript = transcript.split("\n", 1)[1]
    for text in texts:
        assert transcript.count(text) == 1, f"{text!r} is {transcript.count(text)} times"
    return [transcript.index(text) for text in texts]


def test_transcript_has_every_message_once_in_order(story: Story) -> None:
    parent = (story.session(story.parent_id) / "transcript.md").read_text()
    assert parent.startswith(f"# {PROMPT_1}\n")
    look = ["**tool call** `view_image`", "result of `view_image`"]
    said = [PROMPT_1, THOUGHT, COMMAND, SHELL_SAID, *look, ANSWER_1, PROMPT_2]
    said += [ANSWER_2, SUMMARY, PROMPT_3, ANSWER_3, PROMPT_4, ANSWER_4, PROMPT_5, SUB_TASK]
    said += ["**tool call** `wait_agent`", SUB_ANSWER, ANSWER_5]
    positions = _positions(parent, said)
    assert positions == sorted(positions)
    # the prompt's image and the one view_image gave the model
    assert parent.count(f"[image image/png, {len(PIXEL)} bytes]") == 2
    assert "## compactionSummary" in parent
    assert FORK_PROMPT not in parent

    fork = (story.session(story.fork_id) / "transcript.md").read_text()
    assert fork.startswith(f"# {FORK_PROMPT}\n")
    positions = _positions(fork, [*said[: said.index(ANSWER_3) + 1], FORK_PROMPT, FORK_ANSWER])
    assert positions == sorted(positions)
    assert PROMPT_4 not in fork and ANSWER_4 not in fork
    # the parent's part names the parent's entries
    assert f"## user · {story.rollout(story.parent_id).name.removesuffix('.jsonl')}/" in fork


def _lines(rollout: Path) -> list[Json]:
    return [json.loads(line) for line in rollout.read_text().splitlines()]


@pytest.mark.parametrize("which", ["parent", "fork", "sub"])
def test_entries_leaf_title_and_stats(story: Story, which: str) -> None:
    thread_id = {"parent": story.parent_id, "fork": story.fork_id, "sub": story.sub_id}[which]
    first_prompt, last_answer = {
        "parent": (PROMPT_1, ANSWER_5),
        "fork": (FORK_PROMPT, FORK_ANSWER),
        "sub": (SUB_TASK, SUB_ANSWER),
    }[which]
    session = story.session(thread_id)
    lines = _lines(story.rollout(thread_id))
    names = run("ls", session / "entries").split()
    # every line is an entry, known kind or not, and each reads back as written
    assert len(names) == len(lines)
    kinds = {name.split("-", 1)[1].removesuffix(".json") for name in names}
    expected = {"session_meta", "turn_context", "token_usage_record"}
    expected |= {"event_msg-thread_settings_applied", "event_msg-task_started"}
    expected |= {"event_msg-item_completed", "event_msg-token_count", "response_item-message"}
    if which == "parent":
        expected |= {"world_state", "compacted", "response_item-function_call_output"}
    assert expected <= kinds
    for name, line in zip(names, lines, strict=True):
        assert json.loads((session / "entries" / name).read_text()) == line
    assert os.readlink(session / "leaf") == f"entries/{names[-1]}"
    tree = (session / "tree.txt").read_text().splitlines()
    assert len(tree) == len(lines)
    (finished,) = [row for row in tree if "event_msg-item_completed" in row][-1:]
    assert finished.endswith(last_answer)
    assert (session / "title").read_text().strip() == first_prompt

    stats = json.loads((session / "stats.json").read_text())
    assert stats["entries"] == len(lines) and stats["malformedLines"] == 0
    (last,) = [line for line in lines if line["payload"].get("type") == "token_count"][-1:]
    total = last["payload"]["info"]["total_token_usage"]
    assert stats["usage"] == {
        "input": total["input_tokens"],
        "output": total["output_tokens"],
        "cacheRead": total["cached_input_tokens"],
    }
    # and those are the tokens the fake model reported (a fork's count its parent's too)
    counted = story.steps_of(thread_id)
    if which == "fork":
        counted = [*story.sent["1"], *story.sent["2"], *story.sent["3"], *counted]
    usages = [story.usage_sent(request) for request in counted]
    assert stats["usage"]["input"] == sum(u.input_tokens for u in usages)
    assert stats["usage"]["output"] == sum(u.output_tokens for u in usages)
    assert stats["usage"]["cacheRead"] == sum(u.cached_input_tokens for u in usages)

    header = json.loads((session / "header.json").read_text())
    assert header["id"] == thread_id and header["cli_version"] == CODEX_VERSION
    assert header["forked_from_id"] == (story.parent_id if which == "fork" else None)


def test_no_conversation_text_in_a_line_the_reader_maps_to_nothing(story: Story) -> None:
    """Keeping up with Codex: when a newer pinned Codex writes a conversation's words
    into a line kind (or response item type) `core.formats.codex` does not read, this
    fails, naming the kind, instead of the words silently missing from the mount."""
    unread: dict[str, list[str]] = {}
    for thread_id in sorted(story.thread_ids()):
        for line in _lines(story.rollout(thread_id)):
            kind, payload = split_line(line, False)
            text = json.dumps(line, ensure_ascii=False)
            words = [said for said in CONVERSATION if said in text]
            if words and not reads_line(kind, payload):
                name = f"{kind}-{payload.get('type')}" if payload.get("type") else kind
                unread.setdefault(name, []).extend(words)
    assert not unread, (
        f"Codex {CODEX_VERSION} wrote conversation text into lines core/formats/codex.py "
        f"maps to nothing (neither reads nor knows to repeat another line): {unread}. "
        "Teach the reader these kinds (context, transcript) or list them as repeats."
    )


def test_real_rollouts_streamed_are_the_renderings_in_memory(story: Story) -> None:
    """A rollout over the render limit is written a message at a time
    (`sessionfs.view.streamed_agents`): for each rollout the story wrote (a compaction,
    a fork, a sub-agent), the same bytes as the renderings in memory."""
    for thread_id in sorted(story.thread_ids()):
        rollout = story.rollout(thread_id)
        for what in sorted(STREAMED):
            out = io.BytesIO()
            open_streamed("codex", rollout).write(what, out, None)
            whole = render_source(open_agent_file("codex", rollout), what, path=rollout)
            assert out.getvalue() == whole, (rollout.name, what)
