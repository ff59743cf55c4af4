"""The recipes of README.md and of the mount manual (docs/mount.md) run as written
against a real mount of the demo agent dir, so the documentation cannot drift from the
program.

Convention (stated in both documents): a fenced ```sh block whose first line is
``# recipe: <what it does>`` is runnable. It runs unchanged with ``bash -euo pipefail``
on a fresh demo mount. README recipes run from the directory that holds the mount
(named ``mnt``, as ``make run`` makes it); the manual's run from inside the mount,
where its readers are. A ``# expect: <regex>`` line states what the output must
contain; without one, the output must not be empty. After every recipe each session
file in the agent dir must still pass core's checker without an error.

A recipe with a ``# needs: claude`` line runs on the demo mount with ``agents/claude/``
showing a session the real Claude Code wrote (two turns, against the fake Anthropic
server), its ``send`` running that Claude Code; afterwards the session's own file must
be byte-identical.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from support.fake_agent import command
from support.fake_anthropic_server import FakeAnthropicServer
from support.fake_model_server import ModelRequest, message_text
from support.mount import REPO, Mount, MountFactory
from support.real_agents import ClaudeAgent, claude_executable

from core.check import check_file

pytestmark = pytest.mark.fuse

RECIPE_TIMEOUT = 30
#: a recipe that runs the real Claude Code three times (~5 s each on a loaded machine)
CLAUDE_RECIPE_TIMEOUT = 120
RECIPE_MARKER = re.compile(r"^# recipe: (?P<title>.+)$")
EXPECT_MARKER = re.compile(r"^# expect: (?P<regex>.+)$", re.MULTILINE)
NEEDS_CLAUDE = re.compile(r"^# needs: claude$", re.MULTILINE)
SH_BLOCK = re.compile(r"^```sh\n(?P<body>.*?)^```$", re.MULTILINE | re.DOTALL)

#: document -> True when its recipes run inside the mount (else beside it, as ``mnt/``).
DOCUMENTS = {"README.md": False, "docs/mount.md": True}


@dataclass(frozen=True)
class Recipe:
    document: str
    title: str
    script: str

    @property
    def expectations(self) -> list[str]:
        return EXPECT_MARKER.findall(self.script)

    @property
    def runs_inside_mount(self) -> bool:
        return DOCUMENTS[self.document]

    @property
    def needs_claude(self) -> bool:
        return NEEDS_CLAUDE.search(self.script) is not None


def recipes_of(document: str) -> list[Recipe]:
    """The runnable ```sh blocks of a document, in order."""
    text = (REPO / document).read_text(encoding="utf-8")
    found = []
    for block in SH_BLOCK.finditer(text):
        body = block.group("body")
        first_line = body.split("\n", 1)[0]
        marker = RECIPE_MARKER.match(first_line)
        if marker is not None:
            found.append(Recipe(document, marker.group("title"), body))
    return found


ALL_RECIPES = [recipe for document in DOCUMENTS for recipe in recipes_of(document)]
DEMO_RECIPES = [recipe for recipe in ALL_RECIPES if not recipe.needs_claude]
CLAUDE_RECIPES = [recipe for recipe in ALL_RECIPES if recipe.needs_claude]


def run_recipe(
    recipe: Recipe, mount: Mount, timeout: float = RECIPE_TIMEOUT
) -> subprocess.CompletedProcess[str]:
    cwd = mount.path if recipe.runs_inside_mount else mount.path.parent
    assert recipe.runs_inside_mount or mount.path.name == "mnt"
    return subprocess.run(
        ["bash", "-euo", "pipefail", "-c", recipe.script],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def session_file_errors(agent_dir: Path) -> dict[str, list[str]]:
    """Every error core's checker finds in the agent dir's session files (warnings such
    as a v1 file's pending migration are not errors)."""
    errors: dict[str, list[str]] = {}
    for path in sorted((agent_dir / "sessions").glob("*/*.jsonl")):
        report = check_file(path, blobs_dir=agent_dir / "blobs")
        found = [f.message for f in report.problems if f.severity == "error"]
        if found:
            errors[path.name] = found
    return errors


@pytest.fixture
def demo_mount(demo_agent: Path, mount_factory: MountFactory) -> Mount:
    """The demo mount, its ``send`` running the fake agent (`support.fake_agent`)."""
    return mount_factory(demo_agent, "--agent-cmd", command())


@pytest.mark.parametrize("document", list(DOCUMENTS))
def test_document_has_runnable_recipes(document: str) -> None:
    # Guards the convention itself: renaming the fence or the marker must not turn
    # this test file into one that checks nothing.
    assert len(recipes_of(document)) >= 3


def _check_outcome(recipe: Recipe, result: subprocess.CompletedProcess[str]) -> None:
    assert result.returncode == 0, f"{recipe.title!r} failed:\n{result.stderr}"
    assert result.stdout.strip(), f"{recipe.title!r} printed nothing"
    for regex in recipe.expectations:
        assert re.search(regex, result.stdout, re.MULTILINE), (
            f"{recipe.title!r}: no match for {regex!r} in:\n{result.stdout}"
        )


@pytest.mark.parametrize(
    "recipe", DEMO_RECIPES, ids=[f"{r.document}:{r.title}" for r in DEMO_RECIPES]
)
def test_recipe_runs_on_the_demo_mount(recipe: Recipe, demo_mount: Mount) -> None:
    _check_outcome(recipe, run_recipe(recipe, demo_mount))
    assert demo_mount.alive()
    assert session_file_errors(demo_mount.agent_dir) == {}


FIRST_ANSWER = "Use a dict keyed by user id."


def _claude_answer(request: ModelRequest) -> str:
    """The first question's answer (the entry the recipe branches from), else one
    answer for every other request."""
    said = " ".join(message_text(m) for m in request.messages)
    first = "store the users" in said and FIRST_ANSWER not in said
    return FIRST_ANSWER if first else "Done that way."


@pytest.mark.parametrize(
    "recipe", CLAUDE_RECIPES, ids=[f"{r.document}:{r.title}" for r in CLAUDE_RECIPES]
)
def test_claude_recipe_runs_on_a_mount_with_claude_code(
    recipe: Recipe,
    demo_agent: Path,
    mount_factory: MountFactory,
    claude_agent: ClaudeAgent,
    fake_anthropic: FakeAnthropicServer,
    tmp_path: Path,
) -> None:
    fake_anthropic.set_default_reply(_claude_answer)
    work = tmp_path / "work"
    work.mkdir()
    sid = claude_agent.turn("how should I store the users?", work).session_id
    claude_agent.turn("and the sessions?", work, resume=sid)
    original = claude_agent.session_file(sid)
    before = hashlib.sha256(original.read_bytes()).hexdigest()
    mount = mount_factory(
        demo_agent,
        *("--agent-cmd", command(), "--agents", "claude"),
        *("--claude-dir", str(claude_agent.agent_dir)),
        *("--claude-cmd", str(claude_executable(claude_agent.install))),
        env=claude_agent.env(),
    )
    _check_outcome(recipe, run_recipe(recipe, mount, CLAUDE_RECIPE_TIMEOUT))
    assert hashlib.sha256(original.read_bytes()).hexdigest() == before
    assert len(claude_agent.sessions()) == 4  # the session and its three forks
    assert mount.alive()


def test_the_mount_serves_docs_mount_md_as_its_readme(demo_mount: Mount) -> None:
    served = (demo_mount.path / "README.md").read_bytes()
    assert served == (REPO / "docs" / "mount.md").read_bytes()
