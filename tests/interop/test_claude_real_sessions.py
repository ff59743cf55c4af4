"""Real Claude Code sessions through a real mount: what ``agents/claude`` shows is what
Claude Code sends the model.

One story, run once for the module against the fake Anthropic server (8 print-mode
runs, ~15 s): several turns with parallel tool calls (Bash and Read) and their
results, a resume, a fork (``--fork-session``), a branch (``--resume-session-at``), a
compaction (``/compact``), an image in a prompt (``--input-format stream-json``: the
CLI takes no image file argument in print mode) and a sub-agent (tool ``Agent``,
asynchronous in print mode: its outcome comes back as a task notification). After each
run the mount's files of that session are read (``cat``) and kept; each test then
compares them with what Claude Code sent the model on its *next* request.

What "the same messages" means (docs/agents.md, "What context.json holds"): the
requests are compared block by block, in order, after taking out what Claude Code adds
from its ``attachment`` lines (``role: "system"`` messages and ``<system-reminder>``
blocks that are an attachment's ``rendered`` text) and unwrapping the envelope it puts
around a task notification; ``cache_control`` marks are not content.
"""

from __future__ import annotations

import base64
import itertools
import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from support.fake_anthropic_server import FakeAnthropicServer, text, tool_use
from support.fake_model_server import ModelRequest
from support.mount import REPO, Mount, run, start_mount
from support.real_agents import ClaudeAgent, ClaudeTurn, install_claude
from support.waiting import eventually

from core.formats.claude_meta import LINE_TYPES

pytestmark = pytest.mark.fuse

Json = dict[str, Any]
#: A 1x1 PNG.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)
TITLE = "Notes work"
NOTES = "the notes say hello"
#: Everything said in the story: a line carrying one of these carries conversation.
PROMPTS = (
    "read my notes",
    "second question",
    "forked question",
    "branch question",
    "what is in this picture",
    "use a sub agent",
    "list the files",
    "after the agent",
)
REPLIES = (
    "Let me look.",
    "the notes greet you",
    "answer to second question",
    "answer to forked question",
    "answer to branch question",
    "a one-pixel picture",
    "waiting for the sub-agent",
    "sub-agent: notes.txt is here",
    "the sub-agent reported back",
    "answer to after the agent",
    "Notes were read and questions answered.",
)


# --------------------------------------------------------------------------- the story


def _user_blocks(request: ModelRequest) -> list[Json]:
    """The blocks of the request's last user message."""
    (last, *_) = [m for m in reversed(request.messages) if m["role"] == "user"]
    content = last["content"]
    return [text(content)] if isinstance(content, str) else list(content)


def scripted_reply(request: ModelRequest, work: Path) -> str | list[Json]:
    """The model's side of the story, chosen by what the request ends with."""
    blocks = _user_blocks(request)
    results = json.dumps([b for b in blocks if b.get("type") == "tool_result"])
    said = [b["text"] for b in blocks if b.get("type") == "text"]
    last = said[-1] if said else ""
    if "Async agent launched" in results:
        return "waiting for the sub-agent"
    if NOTES in results:
        return "the notes greet you"
    if any(b.get("type") == "image" for b in blocks):
        return "a one-pixel picture"
    if "<task-notification>" in last:
        return "the sub-agent reported back"
    if "CRITICAL: Respond with TEXT ONLY" in last:
        return "<summary>Notes were read and questions answered.</summary>"
    if last == "list the files":
        return "sub-agent: notes.txt is here"
    if last == "use a sub agent":
        agent = {"description": "look around", "prompt": "list the files"}
        return [tool_use("Agent", {**agent, "subagent_type": "general-purpose"})]
    if last == "read my notes":
        bash = {"command": "cat notes.txt", "description": "show the notes"}
        read = {"file_path": str(work / "notes.txt")}
        return [text("Let me look."), tool_use("Bash", bash), tool_use("Read", read)]
    return f"answer to {last}"


@dataclass
class Seen:
    """One session as the mount showed it after a run, and its file then."""

    dir: Path
    context: Json
    transcript: str
    stats: Json
    title: str
    header: Json
    entries: list[str]
    lines: list[Json]

    @classmethod
    def read(cls, session_dir: Path, file: Path) -> Seen:
        return cls(
            session_dir,
            json.loads(run("cat", session_dir / "context.json")),
            run("cat", session_dir / "transcript.md"),
            json.loads(run("cat", session_dir / "stats.json")),
            run("cat", session_dir / "title").strip(),
            json.loads(run("cat", session_dir / "header.json")),
            run("ls", session_dir / "entries").split(),
            [json.loads(line) for line in file.read_bytes().splitlines() if line.strip()],
        )

    def latest(self, kind: str) -> Json | None:
        found = [line for line in self.lines if line.get("type") == kind]
        return found[-1] if found else None


@dataclass
class Run:
    """One ``claude -p`` run: the requests it made (with their answers) and the
    session it wrote as the mount showed it afterwards."""

    name: str
    turn: ClaudeTurn
    answered: list[tuple[ModelRequest, Json]]
    seen: Seen


@dataclass
class Story:
    agent: ClaudeAgent
    fake: FakeAnthropicServer
    mount: Mount
    work: Path
    runs: dict[str, Run] = field(default_factory=dict)
    sub_agent: Seen | None = None

    def session_dir(self, session_id: str) -> Path:
        project = self.agent.session_file(session_id).parent.name
        return self.mount.path / "agents" / "claude" / "sessions" / project / session_id

    def play(
        self, name: str, prompt: str, resume: str | None = None, options: tuple[str, ...] = ()
    ) -> Run:
        before = len(self.fake.answered())
        turn = self.agent.turn(prompt, self.work, resume=resume, options=options)
        return self._seen(name, turn, before)

    def play_image(self, name: str, resume: str) -> Run:
        """A prompt with an image: print mode takes it as a stream-json user message."""
        before = len(self.fake.answered())
        data = base64.b64encode(PNG).decode()
        image = {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/png", "data": data},
        }
        prompt = {"role": "user", "content": [text("what is in this picture"), image]}
        turn = self.agent.turn_messages([prompt], self.work, resume=resume)
        return self._seen(name, turn, before)

    def _seen(self, name: str, turn: ClaudeTurn, before: int) -> Run:
        file = self.agent.session_file(turn.session_id)
        directory = self.session_dir(turn.session_id)
        # The mount reads a changed file again on the next look: wait for this run's
        # last line to show (Claude Code's own leaf, or its last cost-state).
        last_cost = [line for line in file.read_bytes().splitlines() if b'"cost-state"' in line]
        cost = json.loads(last_cost[-1])["totalCostUSD"]
        eventually(lambda: _shown_cost(directory) == cost, f"the mount shows run {name}", within=30)
        seen = Seen.read(directory, file)
        done = Run(name, turn, self.fake.answered()[before:], seen)
        self.runs[name] = done
        return done


def _shown_cost(session_dir: Path) -> float | None:
    try:
        stats = json.loads(run("cat", session_dir / "stats.json"))
    except ValueError:  # the file's old size, still cached by the kernel: read again
        return None
    return stats["usage"].get("cost")


def first_assistant_uuid(lines: list[Json], said: str) -> str:
    (uuid, *_) = [
        line["uuid"]
        for line in lines
        if line.get("type") == "assistant"
        and any(b.get("text") == said for b in line["message"]["content"])
    ]
    return str(uuid)


@pytest.fixture(scope="module")
def story(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Story]:
    from support.real_agents import AgentUnavailable, InstallFailed

    try:
        install = install_claude()
    except AgentUnavailable as error:
        pytest.skip(str(error))
    except InstallFailed as error:
        pytest.fail(str(error))
    base = tmp_path_factory.mktemp("claude-story")
    work = base / "work"
    work.mkdir()
    (work / "notes.txt").write_text(NOTES + "\n")
    (base / "agent").mkdir()
    with FakeAnthropicServer() as fake:
        fake.set_default_reply(lambda request: scripted_reply(request, work))
        agent = ClaudeAgent.at_home(base / "home", fake.base_url, "", install)
        agent.agent_dir.mkdir(parents=True, exist_ok=True)
        mount = start_mount(
            base / "agent", base / "mnt", "--agents", "claude", "--claude-dir", str(agent.agent_dir)
        )
        try:
            told = Story(agent, fake, mount, work)
            first = told.play("tool", "read my notes", options=("--name", TITLE))
            sid = first.turn.session_id
            told.play("resume", "second question", resume=sid)
            told.play("fork", "forked question", resume=sid, options=("--fork-session",))
            at = first_assistant_uuid(first.seen.lines, "the notes greet you")
            told.play("at", "branch question", resume=sid, options=("--resume-session-at", at))
            told.play("compact", "/compact", resume=sid)
            told.play_image("image", resume=sid)
            told.play("agent", "use a sub agent", resume=sid)
            told.play("last", "after the agent", resume=sid)
            (sub_file,) = agent.session_file(sid).parent.glob(f"{sid}/subagents/agent-*.jsonl")
            sub_dir = told.session_dir(sid) / "subagents" / sub_file.stem
            told.sub_agent = Seen.read(sub_dir, sub_file)
            yield told
        finally:
            mount.unmount()


# --------------------------------------------------------------------------- comparing


def attachment_texts(lines: list[Json]) -> set[str]:
    """Every text Claude Code rendered from an attachment line (what it sends as
    ``<system-reminder>`` blocks and system messages; it may add a newline)."""
    rendered: set[str] = set()
    for line in lines:
        if line.get("type") == "attachment":
            for part in line.get("rendered") or []:
                if isinstance(part, dict) and isinstance(part.get("content"), str):
                    rendered.add(part["content"].strip())
    return rendered


def _plain(block: Any) -> Any:
    """A block without ``cache_control`` marks (a request detail, not content)."""
    if isinstance(block, dict):
        return {k: _plain(v) for k, v in block.items() if k != "cache_control"}
    if isinstance(block, list):
        return [_plain(item) for item in block]
    return block


TASK_ENVELOPE = "<system-reminder>\n[SYSTEM NOTIFICATION - NOT USER INPUT]"


def _unwrapped(block: Json) -> Json:
    """A task notification as the session file holds it: Claude Code sends it inside a
    system-reminder envelope with a fixed preamble."""
    said = block.get("text", "")
    if block.get("type") == "text" and said.startswith(TASK_ENVELOPE):
        start, end = said.index("<task-notification>"), said.rindex("</task-notification>")
        return {**block, "text": said[start : end + len("</task-notification>")]}
    return block


def conversation(messages: list[Json], harness: set[str]) -> list[tuple[str, Json]]:
    """(role, block) of every block of ``messages`` in order, without what came from
    attachments (``harness``: their rendered texts) and without system messages."""
    items: list[tuple[str, Json]] = []
    for message in messages:
        if message["role"] == "system":
            continue
        content = message["content"]
        blocks = [text(content)] if isinstance(content, str) else content
        for block in blocks:
            if block.get("type") == "text" and block["text"].strip() in harness:
                continue
            items.append((message["role"], _unwrapped(_plain(block))))
    return items


def shown(seen: Seen) -> list[tuple[str, Json]]:
    return conversation(seen.context["messages"], set())


def sent(request: ModelRequest, seen: Seen) -> list[tuple[str, Json]]:
    return conversation(request.messages, attachment_texts(seen.lines))


#: (the run whose session the mount showed, the run whose first request followed)
NEXT_REQUESTS = [
    ("tool", "resume"),
    ("resume", "fork"),
    ("tool", "at"),  # --resume-session-at the answer of "tool": the context then
    ("at", "compact"),
    ("compact", "image"),
    ("image", "agent"),
    ("agent", "last"),
]


def _seam(items: list[tuple[str, Json]]) -> list[tuple[str, Json]]:
    """``items`` with the newline a following text would add to the last one taken off."""
    if items and items[-1][1].get("type") == "text":
        role, block = items[-1]
        return [*items[:-1], (role, {**block, "text": block["text"].removesuffix("\n")})]
    return items


@pytest.mark.parametrize(("before", "after"), NEXT_REQUESTS)
def test_context_is_what_claude_sends_next(story: Story, before: str, after: str) -> None:
    seen = story.runs[before].seen
    request, _ = story.runs[after].answered[0]
    on_screen, on_wire = shown(seen), sent(request, story.runs[after].seen)
    # The new prompt may join the last user message: Claude Code then ends that
    # message's last text with a newline (as context.json does inside a message).
    assert _seam(on_wire[: len(on_screen)]) == _seam(on_screen)
    added = on_wire[len(on_screen) :]
    assert added and {role for role, _ in added} == {"user"}, added  # only the new prompt
    assert "answer to" not in json.dumps(added)


@pytest.mark.parametrize("name", ["fork", "last"])
def test_context_of_a_last_run_is_its_request_and_answer(story: Story, name: str) -> None:
    """A session's last run: its context is its last request and the answer."""
    done = story.runs[name]
    request, answer = done.answered[-1]
    expected = sent(request, done.seen) + [("assistant", b) for b in answer["content"]]
    assert shown(done.seen) == expected


def test_sub_agent_context_is_its_request_and_answer(story: Story) -> None:
    seen = story.sub_agent
    assert seen is not None
    (request, answer), *_ = [
        (r, a)
        for r, a in story.runs["agent"].answered
        if "list the files" in json.dumps(r.messages[0])  # the sub-agent's own request
    ]
    assert shown(seen) == sent(request, seen) + [("assistant", b) for b in answer["content"]]
    assert seen.header["agentType"] == "general-purpose"
    assert seen.header["description"] == "look around"


def test_user_lines_sent_together_are_one_message(story: Story) -> None:
    for done in story.runs.values():
        roles = [m["role"] for m in done.seen.context["messages"]]
        assert all(a != b for a, b in itertools.pairwise(roles)), (done.name, roles)


def test_context_is_the_branch_claude_continues(story: Story) -> None:
    """After ``--resume-session-at``, the file has two branches: the mount shows the one
    Claude Code continues; after the compaction, the kept answer and the summary."""
    at = json.dumps(story.runs["at"].seen.context)
    assert "branch question" in at and "second question" not in at
    compacted = shown(story.runs["compact"].seen)
    said = [block.get("text", "") for _, block in compacted]
    assert said[0].startswith("This session is being continued")
    assert "answer to branch question" in said  # the preserved segment
    assert "read my notes" not in json.dumps(compacted)  # summarised away
    picture = json.dumps(story.runs["image"].seen.context)
    assert '"media_type": "image/png"' in picture


def _said(items: list[tuple[str, Json]]) -> list[str]:
    """What a reader of the transcript must find, in order: texts, tool names, and
    what tool results say (first lines)."""
    found = []
    for _, block in items:
        kind = block.get("type")
        if kind == "text" and block["text"].strip():
            found.append(block["text"].strip().splitlines()[0])
        elif kind == "tool_use":
            found.append(block["name"])
        elif kind == "tool_result":
            content = block["content"]
            said = content if isinstance(content, str) else content[0].get("text", "")
            found.append(said.strip().splitlines()[0].split("\t")[-1])
    return found


@pytest.mark.parametrize("name", ["tool", "at", "compact", "image", "agent", "last", "fork"])
def test_transcript_has_the_same_turns_in_order(story: Story, name: str) -> None:
    seen = story.runs[name].seen
    at = 0
    for needle in _said(shown(seen)):
        found = seen.transcript.find(needle, at)
        assert found >= 0, f"{needle!r} missing from transcript.md after offset {at}"
        at = found + len(needle)
    if name != "resume":
        assert "answer to second question" not in seen.transcript or name == "fork"


def test_leaf_is_claudes_own(story: Story) -> None:
    for done in story.runs.values():
        last_prompt = done.seen.latest("last-prompt")
        assert last_prompt is not None
        assert done.seen.stats["leafId"] == last_prompt["leafUuid"], done.name


def test_title_is_the_one_claude_shows(story: Story) -> None:
    assert story.runs["last"].seen.title == TITLE
    fork = story.runs["fork"].seen
    custom = fork.latest("custom-title")
    expected = custom["customTitle"] if custom else fork.latest("last-prompt")["lastPrompt"]
    assert fork.title == expected


def test_stats_are_claudes_cost_state(story: Story) -> None:
    for done in story.runs.values():
        cost = done.seen.latest("cost-state")
        assert cost is not None
        models = cost["modelUsage"].values()
        assert done.seen.stats["usage"] == {
            "input": sum(m["inputTokens"] for m in models),
            "output": sum(m["outputTokens"] for m in models),
            "cacheRead": sum(m["cacheReadInputTokens"] for m in models),
            "cacheWrite": sum(m["cacheCreationInputTokens"] for m in models),
            "cost": cost["totalCostUSD"],
        }, done.name
    # ... and cost-state counts every answer of the session (compaction and
    # sub-agent calls too, which write no assistant line to the session file).
    main = story.runs["last"]
    session = main.turn.session_id
    answers = [a for r, a in story.fake.answered() if session in json.dumps(r.body.get("metadata"))]
    assert main.seen.stats["usage"]["output"] == sum(a["usage"]["output_tokens"] for a in answers)


def test_every_line_is_an_entry(story: Story) -> None:
    for seen in [*(done.seen for done in story.runs.values()), story.sub_agent]:
        assert seen is not None
        names: list[str] = []
        for number, line in enumerate(seen.lines, 1):
            name = line.get("uuid") or f"meta-{number}-{line['type']}"
            if name not in names:
                names.append(name)
        assert sorted(seen.entries) == sorted(f"{name}.json" for name in names)
        assert seen.stats["malformedLines"] == 0


# --------------------------------------------------------------------------- keeping up


def unmapped_lines_with_words(lines: list[Json], words: tuple[str, ...]) -> list[str]:
    """Lines of a type the reader maps to nothing (`LINE_TYPES`) that carry any of
    ``words``: each as ``"<type>: <word>"``."""
    found = []
    for line in lines:
        kind = str(line.get("type"))
        if kind in LINE_TYPES:
            continue
        said = json.dumps(line, ensure_ascii=False)
        found += [f"{kind}: {word!r}" for word in words if word in said][:1]
    return found


def test_the_keeping_up_check_catches_an_unknown_line_with_words() -> None:
    lines = [{"type": "user"}, {"type": "future-note", "text": "read my notes again"}]
    assert unmapped_lines_with_words(lines, PROMPTS) == ["future-note: 'read my notes'"]
    assert unmapped_lines_with_words([{"type": "future-flag", "on": True}], PROMPTS) == []


def test_no_line_type_unknown_to_the_reader_carries_conversation(story: Story) -> None:
    """When the pin is raised and Claude Code writes a new line type holding words of
    the conversation, this fails instead of the words silently missing from
    ``context.json``."""
    seen_files = [story.runs["last"].seen, story.runs["fork"].seen, story.sub_agent]
    lost = []
    for seen in seen_files:
        assert seen is not None
        lost += unmapped_lines_with_words(seen.lines, PROMPTS + REPLIES)
    assert not lost, (
        f"Claude Code {story.runs['last'].seen.header['version']} writes line types the "
        f"reader maps to nothing, carrying conversation text: {sorted(set(lost))}. Map "
        "them in core/formats/claude_meta.py LINE_TYPES (and show their words in "
        "context.json/transcript.md where Claude Code sends them to the model)."
    )


# --------------------------------------------------------------------------- check


def test_sessionfs_check_knows_claude_files(story: Story) -> None:
    """``sessionfs check`` on what the real Claude Code wrote: its files, clean by
    its rules, not xcsh files without a header."""
    sid = story.runs["last"].turn.session_id
    main = story.agent.session_file(sid)
    fork = story.agent.session_file(story.runs["fork"].turn.session_id)
    (sub,) = main.parent.glob(f"{sid}/subagents/agent-*.jsonl")
    done = subprocess.run(
        [sys.executable, "-m", "sessionfs", "check", "--json", str(main), str(fork), str(sub)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    document = json.loads(done.stdout)
    assert done.returncode == 0, done.stdout
    assert [(f["agent"], f["findings"]) for f in document["files"]] == [("claude", [])] * 3
