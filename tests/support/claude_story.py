"""One story told by the real Claude Code through a real mount, recorded for the tests
(`tests/interop/test_claude_real_sessions.py`).

Eight ``claude -p`` runs against the fake Anthropic server, in one test HOME:

1. ``tool``: a new session named `TITLE` (``--name``); the model thinks, calls Bash
   and Read in parallel, then answers;
2. ``resume``: ``--resume`` with a second question;
3. ``fork``: ``--resume --fork-session`` (a new file with the history copied);
4. ``at``: ``--resume-session-at`` the answer of run 1 (a second branch in the file);
5. ``compact``: ``/compact`` (the summary is scripted; the last answer is kept);
6. ``image``: a prompt with an image (print mode takes one only as an
   ``--input-format stream-json`` user message);
7. ``agent``: the model starts a sub-agent (tool ``Agent``; asynchronous in print
   mode: its outcome comes back as a task notification the model answers);
8. ``last``: one more question.

After each run the mount's files of the session it wrote are read with ``cat``/``ls``
and kept (`Seen`) with the requests that run made and their answers. The record is
JSON (`Story.save`/`load`): `shared_story` tells the story once per test run and hands
the same record to every pytest worker, so ``-n 2`` does not run Claude Code twice.
"""

from __future__ import annotations

import base64
import fcntl
import json
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from support.fake_anthropic_server import FakeAnthropicServer, text, thinking, tool_use
from support.fake_model_server import ModelRequest
from support.mount import Mount, run, start_mount
from support.real_agents import ClaudeAgent, ClaudeTurn
from support.waiting import eventually

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
    "the notes are in notes.txt",
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
        look = [thinking("the notes are in notes.txt"), text("Let me look.")]
        return [*look, tool_use("Bash", bash), tool_use("Read", read)]
    return f"answer to {last}"


# --------------------------------------------------------------------------- the record


@dataclass
class Seen:
    """One session as the mount showed it after a run, and its file then."""

    file: str
    dir: str
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
            str(file),
            str(session_dir),
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
class Answered:
    """One request the fake server recorded and the message it answered with."""

    path: str
    body: Json
    message: Json

    @property
    def request(self) -> ModelRequest:
        return ModelRequest(self.path, self.body)


@dataclass
class Run:
    """One ``claude -p`` run: its session, the requests it made (with their answers)
    and that session as the mount showed it afterwards."""

    name: str
    session_id: str
    answered: list[Answered]
    seen: Seen


@dataclass
class Story:
    runs: dict[str, Run] = field(default_factory=dict)
    #: the sub-agent of run ``agent``, after the story
    sub_agent: Seen | None = None
    #: every request of the story with its answer, in order
    answered: list[Answered] = field(default_factory=list)

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(asdict(self)))

    @classmethod
    def load(cls, path: Path) -> Story:
        raw = json.loads(path.read_text())

        def answers(items: list[Json]) -> list[Answered]:
            return [Answered(**item) for item in items]

        runs = {
            name: Run(
                item["name"], item["session_id"], answers(item["answered"]), Seen(**item["seen"])
            )
            for name, item in raw["runs"].items()
        }
        sub = Seen(**raw["sub_agent"]) if raw["sub_agent"] else None
        return cls(runs, sub, answers(raw["answered"]))


# --------------------------------------------------------------------------- telling it


def _answered(fake: FakeAnthropicServer) -> list[Answered]:
    return [Answered(r.path, r.body, message) for r, message in fake.answered()]


def _shown_cost(session_dir: Path) -> float | None:
    shown = run("cat", session_dir / "stats.json", check=False)
    try:
        stats = json.loads(shown)
    except ValueError:
        # Not listed yet (the mount rescans the project dir on a later look), or the
        # file's old size still cached by the kernel: read again.
        return None
    return stats["usage"].get("cost")


@dataclass
class _Teller:
    agent: ClaudeAgent
    fake: FakeAnthropicServer
    mount: Mount
    work: Path
    story: Story = field(default_factory=Story)

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
        before = len(self.fake.answered())
        data = base64.b64encode(PNG).decode()
        source = {"type": "base64", "media_type": "image/png", "data": data}
        blocks = [text("what is in this picture"), {"type": "image", "source": source}]
        turn = self.agent.turn_messages([{"role": "user", "content": blocks}], self.work, resume)
        return self._seen(name, turn, before)

    def _seen(self, name: str, turn: ClaudeTurn, before: int) -> Run:
        file = self.agent.session_file(turn.session_id)
        directory = self.session_dir(turn.session_id)
        # The mount reads a changed file again on a later look: wait until it shows
        # this run's last cost-state (the last line Claude Code writes in a run).
        costs = [line for line in file.read_bytes().splitlines() if b'"cost-state"' in line]
        cost = json.loads(costs[-1])["totalCostUSD"]
        eventually(lambda: _shown_cost(directory) == cost, f"the mount shows run {name}", 30)
        done = Run(name, turn.session_id, _answered(self.fake)[before:], Seen.read(directory, file))
        self.story.runs[name] = done
        return done


def _first_answer_uuid(lines: list[Json], said: str) -> str:
    (uuid, *_) = [
        line["uuid"]
        for line in lines
        if line.get("type") == "assistant"
        and any(b.get("text") == said for b in line["message"]["content"])
    ]
    return str(uuid)


def tell_story(claude_install: Path, base: Path) -> Story:
    """The story (module docstring), told in ``base``: HOME, work dir and mount there."""
    work = base / "work"
    work.mkdir(parents=True)
    (work / "notes.txt").write_text(NOTES + "\n")
    (base / "agent").mkdir()
    with FakeAnthropicServer() as fake:
        fake.set_default_reply(lambda request: scripted_reply(request, work))
        agent = ClaudeAgent.at_home(base / "home", fake.base_url, "", claude_install)
        agent.agent_dir.mkdir(parents=True, exist_ok=True)
        options = ("--agents", "claude", "--claude-dir", str(agent.agent_dir))
        mount = start_mount(base / "agent", base / "mnt", *options)
        try:
            teller = _Teller(agent, fake, mount, work)
            first = teller.play("tool", "read my notes", options=("--name", TITLE))
            sid = first.session_id
            teller.play("resume", "second question", resume=sid)
            teller.play("fork", "forked question", resume=sid, options=("--fork-session",))
            at = _first_answer_uuid(first.seen.lines, "the notes greet you")
            teller.play("at", "branch question", resume=sid, options=("--resume-session-at", at))
            teller.play("compact", "/compact", resume=sid)
            teller.play_image("image", resume=sid)
            teller.play("agent", "use a sub agent", resume=sid)
            teller.play("last", "after the agent", resume=sid)
            (sub_file,) = agent.session_file(sid).parent.glob(f"{sid}/subagents/agent-*.jsonl")
            sub_dir = teller.session_dir(sid) / "subagents" / sub_file.stem
            teller.story.sub_agent = Seen.read(sub_dir, sub_file)
            teller.story.answered = _answered(fake)
            return teller.story
        finally:
            mount.unmount()


def shared_story(claude_install: Path, shared: Path) -> Story:
    """The story recorded in ``shared`` (a dir every worker of this test run sees):
    told by the first worker that asks, read back by the others."""
    shared.mkdir(parents=True, exist_ok=True)
    record = shared / "story.json"
    with open(shared / ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not record.exists():
            tell_story(claude_install, Path(tempfile.mkdtemp(prefix="told-", dir=shared))).save(
                record
            )
    return Story.load(record)
