"""Real Claude Code sessions through a real mount: what ``agents/claude`` shows is what
Claude Code sends the model.

One story (`support.claude_story`: 8 print-mode runs, ~10 s, told once per test run):
several turns with parallel tool calls (Bash and Read) and their results, a resume, a
fork (``--fork-session``), a branch (``--resume-session-at``), a compaction
(``/compact``), an image in a prompt (``--input-format stream-json``: the CLI takes no
image file argument in print mode) and a sub-agent (tool ``Agent``, asynchronous in
print mode: its outcome comes back as a task notification). After each run the mount's
files of that session were read (``cat``) and kept; each test compares them with what
Claude Code sent the model on its *next* request.

What "the same messages" means (docs/agents.md, "What context.json holds"): the
requests are compared block by block, in order, after taking out what Claude Code adds
from its ``attachment`` lines (``role: "system"`` messages and ``<system-reminder>``
blocks that are an attachment's ``rendered`` text) and unwrapping the envelope it puts
around a task notification; ``cache_control`` marks are not content.
"""

from __future__ import annotations

import io
import itertools
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support.claude_story import PROMPTS, REPLIES, TITLE, Seen, Story, shared_story
from support.fake_anthropic_server import text
from support.fake_model_server import ModelRequest
from support.mount import REPO

from core.formats.claude_meta import LINE_TYPES
from sessionfs.view.agent_sources import open_agent_file
from sessionfs.view.renderings import render_source
from sessionfs.view.streamed_files import STREAMED, open_streamed

pytestmark = pytest.mark.fuse

Json = dict[str, Any]


@pytest.fixture(scope="module")
def story(claude_install: Path, tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Story:
    """The story, told once per test run: every xdist worker reads the same record."""
    base = tmp_path_factory.getbasetemp()
    return shared_story(
        claude_install, (base if worker_id == "master" else base.parent) / "claude-story"
    )


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
    request = story.runs[after].answered[0].request
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
    last = done.answered[-1]
    expected = sent(last.request, done.seen) + [("assistant", b) for b in last.message["content"]]
    assert shown(done.seen) == expected


def test_sub_agent_context_is_its_request_and_answer(story: Story) -> None:
    seen = story.sub_agent
    assert seen is not None
    (own, *_) = [
        answered
        for answered in story.runs["agent"].answered
        if "list the files" in json.dumps(answered.request.messages[0])  # the sub-agent's
    ]
    answer = [("assistant", block) for block in own.message["content"]]
    assert shown(seen) == sent(own.request, seen) + answer
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
    """What a reader of the transcript must find, in order: texts and thinking, tool
    names, and what tool results say (first lines)."""
    found = []
    for _, block in items:
        kind = block.get("type")
        if kind in ("text", "thinking") and block[kind].strip():
            found.append(block[kind].strip().splitlines()[0])
        elif kind == "tool_use":
            found.append(block["name"])
        elif kind == "tool_result":
            content = block["content"]
            said = content if isinstance(content, str) else content[0].get("text", "")
            found.append(said.strip().splitlines()[0].split("\t")[-1])
    return found


#: run -> whether its session's branch holds the answer to run ``resume``
BRANCHES = {
    "tool": False,
    "resume": True,
    "fork": True,
    "at": False,  # --resume-session-at left that answer on the other branch
    "compact": False,
    "image": False,
    "agent": False,
    "last": False,
}


@pytest.mark.parametrize(("name", "has_second_answer"), BRANCHES.items())
def test_transcript_has_the_same_turns_in_order(
    story: Story, name: str, has_second_answer: bool
) -> None:
    seen = story.runs[name].seen
    at = 0
    for needle in _said(shown(seen)):
        found = seen.transcript.find(needle, at)
        assert found >= 0, f"{needle!r} missing from transcript.md after offset {at}"
        at = found + len(needle)
    assert ("answer to second question" in seen.transcript) is has_second_answer


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
    answers = [
        a.message for a in story.answered if main.session_id in json.dumps(a.body.get("metadata"))
    ]
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
    assert story.sub_agent is not None
    main, fork = story.runs["last"].seen.file, story.runs["fork"].seen.file
    sub = story.sub_agent.file
    done = subprocess.run(
        [sys.executable, "-m", "sessionfs", "check", "--json", main, fork, sub],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    document = json.loads(done.stdout)
    assert done.returncode == 0, done.stdout
    assert [(f["agent"], f["findings"]) for f in document["files"]] == [("claude", [])] * 3


def test_real_files_streamed_are_the_renderings_in_memory(story: Story) -> None:
    """A Claude Code file over the render limit is written a turn at a time
    (`sessionfs.view.streamed_agents`): for every file the story wrote (a compaction, a
    fork, a branch, parallel tool calls, an image, a sub-agent's file), the same bytes
    as the renderings in memory."""
    files = {Path(run.seen.file) for run in story.runs.values()}
    if story.sub_agent is not None:
        files.add(Path(story.sub_agent.file))
    assert len(files) >= 3
    for file in sorted(files):
        for what in sorted(STREAMED):
            out = io.BytesIO()
            open_streamed("claude", file).write(what, out, None)
            whole = render_source(open_agent_file("claude", file), what, path=file)
            assert out.getvalue() == whole, (file.name, what)
