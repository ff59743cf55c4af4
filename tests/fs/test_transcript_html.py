"""``transcript.html``, ``branches/`` and ``tree.svg`` through a real mount: ``cat`` of
every session's page and picture (xcsh, a Claude Code and a Codex session, sub-agents
of both), every relative link in them leads to a file of the mount, the branch pages
of a fork, the demo's image inlined from its blob, a hostile session shown as text,
``stat`` equal to what ``cat`` reads, and a page that follows an append and a leaf
moved through the mount."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from urllib.parse import unquote, urlsplit
from xml.etree import ElementTree

import pytest
from support.html_sessions import hostile_agent
from support.mount import Mount, MountFactory, run
from support.other_agents import CODEX_PROJECT, AgentTrees

pytestmark = pytest.mark.fuse

DEMO_CLAUDE_PROJECT = "-home-demo-webapp"
_HREF = re.compile(r'(?:href|src)="([^"]*)"')


def cat_page(page: Path) -> str:
    """The page as ``cat`` reads it, after checking ``stat`` agrees with it."""
    text = run("cat", page)
    assert os.stat(page).st_size == len(text.encode()), page
    assert text.startswith("<!DOCTYPE html>") and text.endswith("</html>\n"), page
    return text


def links_of(text: str) -> list[str]:
    """Every link a page holds (``data:`` images left out), HTML entities undone."""
    found = []
    for raw in _HREF.findall(text):
        link = raw.replace("&amp;", "&").replace("&quot;", '"').replace("&#x27;", "'")
        if not link.startswith("data:"):
            found.append(link)
    return found


def assert_links_resolve(page: Path, text: str) -> None:
    """Every link of ``page`` is relative and names a file or dir of the mount."""
    for link in links_of(text):
        parts = urlsplit(link)
        assert not parts.scheme and not parts.netloc and not link.startswith("/"), link
        target = page.parent / unquote(parts.path)
        assert target.exists(), (page, link)


def check_session_pages(session: Path) -> dict[str, str]:
    """``cat`` the session's transcript.html and every page in ``branches/``, checking
    each page's links; returns the pages by name."""
    pages = {"transcript.html": cat_page(session / "transcript.html")}
    for name in run("ls", session / "branches").split():
        pages[f"branches/{name}"] = cat_page(session / "branches" / name)
    for name, text in pages.items():
        assert_links_resolve(session / name, text)
    check_tree_svg(session)
    return pages


def check_tree_svg(session: Path) -> None:
    """``tree.svg`` is well-formed, draws a row per entry (these trees are small) and
    links each to a file of the mount."""
    svg = run("cat", session / "tree.svg")
    assert os.stat(session / "tree.svg").st_size == len(svg.encode())
    rows = list(ElementTree.fromstring(svg).iter("{http://www.w3.org/2000/svg}g"))
    assert len(rows) == len(os.listdir(session / "entries")), session
    assert_links_resolve(session / "tree.svg", svg)


def test_every_demo_session_has_a_page_whose_links_work(demo_mount: Mount) -> None:
    sessions = sorted((demo_mount.path / "sessions").glob("*/*"))
    assert len(sessions) == 4
    for session in sessions:
        pages = check_session_pages(session)
        title = (session / "title").read_text().strip()
        if title:
            assert f"<title>{title}</title>" in pages["transcript.html"]


def test_the_demo_fork_links_its_branch_pages(demo_mount: Mount) -> None:
    webapp = next(
        s
        for s in (demo_mount.path / "sessions" / "--home-demo-webapp--").iterdir()
        if "login redirect" in (s / "title").read_text()
    )
    pages = check_session_pages(webapp)
    current = pages["transcript.html"]
    assert "Branch point" in current
    branch_links = [
        link for link in links_of(current) if link.startswith("branches/") and link != "branches/"
    ]
    assert branch_links, current
    tips = run("ls", webapp / "branches").split()
    assert len(tips) >= 3  # three tips: two alternatives under the plan, and the leaf
    assert all(unquote(link).removeprefix("branches/") in tips for link in branch_links)
    # The page of an older branch holds what transcript.md at that leaf holds.
    other = pages[branch_links[0]]
    assert "../transcript.html" in links_of(other)
    # The demo's image is inlined from the blob store, and linked to its file.
    blob = run("ls", webapp / "blobs").split()[0]
    assert "data:image/png;base64," in current and f'href="blobs/{blob}"' in current


def test_a_page_follows_an_append_and_a_leaf_move(demo_mount: Mount) -> None:
    session = (demo_mount.path / "recent" / "1").resolve()
    before = cat_page(session / "transcript.html")
    (session / "append" / "note.md").write_text("A note <b>added</b> through the mount.\n")
    after = cat_page(session / "transcript.html")
    assert "A note &lt;b&gt;added&lt;/b&gt; through the mount." in after
    assert after != before
    first = sorted(os.listdir(session / "path"))[2]
    run("ln", "-sfn", os.readlink(session / "path" / first)[1:], session / "leaf")
    moved = cat_page(session / "transcript.html")
    assert "through the mount" not in moved and len(moved) < len(after)


def test_a_hostile_session_shows_as_text(tmp_path: Path, mount_factory: MountFactory) -> None:
    mount: Mount = mount_factory(hostile_agent(tmp_path))
    session = mount.path / "sessions" / "--hostile--" / "hostile"
    pages = check_session_pages(session)
    assert set(pages) == {"transcript.html", "branches/ok.html", "branches/side.html"}
    for text in pages.values():
        assert "<script" not in text and "<img src=x" not in text
        assert "&lt;script&gt;document.title=&#x27;pwned&#x27;&lt;/script&gt;" in text
        assert not any(link.lower().startswith("javascript") for link in links_of(text))
    # The leaf is the last entry of the file: "side"; the other branch ends at "ok".
    assert "branches/ok.html" in links_of(pages["transcript.html"])
    assert "../transcript.html" in links_of(pages["branches/ok.html"])


def test_claude_and_codex_sessions_and_sub_agents_have_pages(
    agents_mount: Mount, agent_trees: AgentTrees
) -> None:
    claude = agents_mount.path / "agents" / "claude" / "sessions" / DEMO_CLAUDE_PROJECT
    session = claude / agent_trees.claude_session.stem
    pages = check_session_pages(session)
    current = pages["transcript.html"]
    assert "move the middleware below the login route" in current  # the resumed branch
    assert "Branch point" in current  # the rewind
    rewound = [text for name, text in pages.items() if "Exempted /login" in text]
    assert rewound and all("../transcript.html" in links_of(text) for text in rewound)
    for sub in (session / "subagents").iterdir():
        sub_page = check_session_pages(sub)["transcript.html"]
        assert (sub / "title").read_text().strip() in sub_page or "<h1>" in sub_page

    codex = agents_mount.path / "agents" / "codex" / "sessions" / CODEX_PROJECT
    rollout = codex / agent_trees.codex_rollout.name.removesuffix(".jsonl")
    codex_pages = check_session_pages(rollout)
    assert "Branch point" not in codex_pages["transcript.html"]
    assert len(codex_pages) == 2  # transcript.html and its one branch's page
    assert (rollout / "subagents").is_dir()
    for sub in (rollout / "subagents").iterdir():
        check_session_pages(sub)


def test_an_xcsh_sub_agent_has_a_page(demo_mount: Mount) -> None:
    subs = list((demo_mount.path / "sessions").glob("*/*/subagents/*"))
    assert subs, "the demo has a sub-agent run"
    for sub in subs:
        text = check_session_pages(sub)["transcript.html"]
        assert 'class="msg user"' in text


def test_the_pages_are_read_only(demo_mount: Mount) -> None:
    session = (demo_mount.path / "recent" / "1").resolve()
    files = sorted(demo_mount.agent_dir.rglob("*.jsonl"))
    before = {f: f.read_bytes() for f in files}
    page = next((session / "branches").iterdir())
    attempts = [
        (["sh", "-c", f"echo x > '{session / 'transcript.html'}'"], session / "transcript.html"),
        (["sh", "-c", f"echo x > '{session / 'tree.svg'}'"], session / "tree.svg"),
        (["touch", str(session / "branches" / "new.html")], None),
        (["rm", str(page)], page),
        (["mkdir", str(session / "branches" / "d")], None),
    ]
    for argv, kept in attempts:
        result = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        assert result.returncode != 0, argv
        assert "not permitted" in result.stderr or "Permission denied" in result.stderr, argv
        if kept is not None:
            assert kept.exists()
    assert not (session / "branches" / "new.html").exists()
    assert {f: f.read_bytes() for f in files} == before


def test_pages_come_from_the_workers_and_the_cache_dir(
    demo_agent: Path, mount_factory: MountFactory, tmp_path: Path
) -> None:
    """A page of a session the daemon has not loaded is made by the render workers and
    kept in ``--cache-dir`` (``pages/``), as ``transcript.md`` is: a remount with the
    cache dir kept serves the same bytes and renders nothing; a session loaded for a
    leaf moved through the mount is rendered by the daemon, from its leaf."""
    cache = tmp_path / "kept-cache"
    first = mount_factory(demo_agent, "--cache-dir", str(cache), name="first")
    pages = sorted((first.path / "sessions").glob("*/*/transcript.html"))
    expected = {page.relative_to(first.path): cat_page(page) for page in pages}
    first.unmount()
    assert f"transcript.html: {len(pages)} rendered, 0 found" in first.log.read_text()
    assert len(list(cache.glob("agent-*/pages/*"))) == len(pages)
    again = mount_factory(demo_agent, "--cache-dir", str(cache), name="again")
    assert {name: cat_page(again.path / name) for name in expected} == expected
    session = (again.path / "recent" / "1").resolve()
    first_entry = sorted(os.listdir(session / "path"))[0]
    run("ln", "-sfn", os.readlink(session / "path" / first_entry)[1:], session / "leaf")
    moved = cat_page(session / "transcript.html")  # pinned leaf: rendered in the daemon
    assert moved.count('class="msg') < expected[
        session.relative_to(again.path) / "transcript.html"
    ].count('class="msg')
    again.unmount()
    assert f"transcript.html: 0 rendered, {len(pages)} found" in again.log.read_text()
