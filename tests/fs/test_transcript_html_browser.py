"""``transcript.html`` (and ``tree.svg``) in a real headless Chromium, read straight
from a mount (``file://``): the DOM after load (``--dump-dom``) and screenshots in the
light and the dark scheme, for the demo sessions (xcsh with a fork, an image and a sub-agent, a
Claude Code rewind, a Codex rollout) and for hostile ones, whose scripts must not run.

Skipped only when Chromium is not installed (``.ci/run`` installs Debian's
``chromium``)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from support.chromium import chromium_or_skip, dump_dom, screenshot
from support.html_sessions import HOSTILE_PROJECT, hostile_agent
from support.mount import Mount, MountFactory, isolated_env
from support.other_agents import CODEX_PROJECT, AgentTrees
from support.png_pixels import mean_luminance

from sessionfs.view.cache_dir import agent_cache_dir
from sessionfs.view.session_cache import RENDER_LIMIT_ENV

pytestmark = pytest.mark.fuse

#: A script that, if it ran, would leave marks in the dumped DOM.
PAYLOAD = (
    "<script>document.title='pwned';"
    "document.body.appendChild(document.createElement('h6')).id='pwned'</script>"
    "<img src=x onerror=\"document.body.appendChild(document.createElement('h5')).id='pwned2'\">"
)
RAN = ('id="pwned"', 'id="pwned2"', "<title>pwned</title>")


@pytest.fixture(autouse=True)
def _chromium() -> None:
    chromium_or_skip()


def demo_pages(mount: Mount, agent_trees: AgentTrees) -> dict[str, Path]:
    sessions = mount.path / "sessions"
    webapp = next(
        s
        for s in (sessions / "--home-demo-webapp--").iterdir()
        if "login redirect" in (s / "title").read_text()
    )
    branch = sorted((webapp / "branches").iterdir())[0]
    sub = next(sessions.glob("*/*/subagents/*"))
    claude = mount.path / "agents" / "claude" / "sessions" / "-home-demo-webapp"
    codex = mount.path / "agents" / "codex" / "sessions" / CODEX_PROJECT
    return {
        "webapp": webapp / "transcript.html",
        "branch": branch,
        "subagent": sub / "transcript.html",
        "claude": claude / agent_trees.claude_session.stem / "transcript.html",
        "codex": codex / agent_trees.codex_rollout.name.removesuffix(".jsonl") / "transcript.html",
    }


#: What each demo page's DOM holds once loaded.
EXPECT = {
    "webapp": ["Fix the login redirect loop", "Branch point", "data:image/png;base64,"],
    "branch": ["The branch ending at", "transcript.html"],
    "subagent": ['class="msg user"'],
    "claude": ["move the middleware below the login route", "Branch point"],
    "codex": ['class="msg user"', 'class="msg assistant"'],
}


def light_and_dark(page: Path, out: Path, size: str) -> tuple[float, float]:
    """The mean luminance of the page's screenshots in the light and the dark scheme."""
    light = mean_luminance(screenshot(page, out.with_suffix(".light.png"), size=size))
    dark = mean_luminance(screenshot(page, out.with_suffix(".dark.png"), dark=True, size=size))
    return light, dark


@pytest.mark.parametrize("name", list(EXPECT))
def test_a_demo_page_loads_and_reads_well_in_both_schemes(
    name: str, agents_mount: Mount, agent_trees: AgentTrees, tmp_path: Path
) -> None:
    page = demo_pages(agents_mount, agent_trees)[name]
    dom = dump_dom(page)
    assert "<main>" in dom and "</main>" in dom
    for text in EXPECT[name]:
        assert text in dom, text
    assert not any(mark in dom for mark in RAN)
    if name not in ("webapp", "claude"):
        return
    assert "<details" in dom  # thinking and tool calls folded
    light, dark = light_and_dark(page, tmp_path / name, "800,700")
    assert light > 200 and dark < 60, (light, dark)
    tree = page.parent / "tree.svg"
    assert "<svg" in dump_dom(tree)
    light, dark = light_and_dark(tree, tmp_path / f"{name}-tree", "600,300")
    assert light > 180 and dark < 80, ("tree.svg", light, dark)


def test_a_hostile_session_runs_nothing(tmp_path: Path, mount_factory: MountFactory) -> None:
    agent = hostile_agent(tmp_path, PAYLOAD)
    mount: Mount = mount_factory(agent)
    session = mount.path / "sessions" / HOSTILE_PROJECT / "hostile"
    for page in [session / "transcript.html", *sorted((session / "branches").iterdir())]:
        assert_runs_nothing(page)


def test_a_hostile_session_too_big_to_render_in_memory_runs_nothing(
    tmp_path: Path, mount_factory: MountFactory
) -> None:
    """The page a worker writes a message at a time for a file over the render limit
    (lowered here: every file is over it) escapes as the page rendered in memory."""
    agent = hostile_agent(tmp_path, PAYLOAD)
    env = {**isolated_env(), RENDER_LIMIT_ENV: "100"}
    mount: Mount = mount_factory(agent, "--cache-dir", str(tmp_path / "cache"), env=env)
    page = mount.path / "sessions" / HOSTILE_PROJECT / "hostile" / "transcript.html"
    assert_runs_nothing(page)
    pages = agent_cache_dir(tmp_path / "cache", agent) / "pages"
    assert [p for p in pages.iterdir() if not p.name.startswith(".")]  # a worker wrote it


def assert_runs_nothing(page: Path) -> None:
    dom = dump_dom(page)
    assert not any(mark in dom for mark in RAN), page
    assert "<script" not in dom and "<h6" not in dom
    # The payload is on the page as text, title included.
    assert "&lt;script&gt;document.title='pwned'" in dom
    title = re.search(r"<title>(.*?)</title>", dom, re.S)
    assert title is not None and title.group(1).startswith("&lt;script&gt;")


def test_the_pages_policy_stops_a_script_that_got_in(demo_mount: Mount, tmp_path: Path) -> None:
    """Defence in depth: were a script ever to get past the escaping, the page's
    Content-Security-Policy keeps it from running. The same page without the policy
    runs it (so this test can tell)."""
    page = next((demo_mount.path / "sessions").glob("*/*/transcript.html"))
    text = page.read_text()
    injected = text.replace("</main>", PAYLOAD + "</main>")
    assert injected != text
    guarded = tmp_path / "guarded.html"
    guarded.write_text(injected)
    dom = dump_dom(guarded)
    assert "<script>" in dom and not any(mark in dom for mark in RAN)
    bare = tmp_path / "bare.html"
    bare.write_text(re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", injected))
    ran = dump_dom(bare)
    assert 'id="pwned"' in ran and "<title>pwned</title>" in ran
