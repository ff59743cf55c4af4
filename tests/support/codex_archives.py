"""Codex rollouts archived as ``.jsonl.zst`` and a daemon's cache over them, for the
in-process tests of the daemon's handling of compressed files."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import zstandard

from core.agent_homes import AgentHome
from sessionfs.view.agent_sources import catalog_for, open_agent_file
from sessionfs.view.loaded_session import LoadedSession
from sessionfs.view.other_agent_index import OtherAgentIndex
from sessionfs.view.session_cache import SessionCache
from support.long_codex_sessions import CWD
from support.long_codex_sessions import SESSION_ID as CODEX_SESSION_ID
from support.other_agents import load_demo_agents


def archived_rollout(
    codex: Path, said: bool, prompts: int = 200, filler: int = 0
) -> tuple[Path, int]:
    """A Codex rollout of ``prompts`` user messages compressed into
    ``archived_sessions/`` (its header giving its text's size or not: ``said``), its
    last line said again until the text is ``filler`` bytes longer; (its path, its
    text's size)."""
    lines = load_demo_agents().CodexLines(1_780_000_000.0)
    lines.session_meta(CODEX_SESSION_ID, CWD)
    lines.turn_context(CWD)
    for i in range(prompts):
        lines.message("user", f"prompt {i}: the same words again and again")

    def longer(text: bytes) -> bytes:
        last = text.splitlines(keepends=True)[-1]
        return text + last * (filler // len(last))

    path, text = archive_lines(codex, lines.lines, said, longer)
    return path, len(text)


def archive_lines(
    codex: Path,
    lines: list[object],
    said: bool = True,
    edit: Callable[[bytes], bytes] = lambda text: text,
    compress: Callable[[bytes], bytes] | None = None,
) -> tuple[Path, bytes]:
    """The rollout ``lines`` (a demo ``CodexLines``'s) written as the demo writes them,
    its text passed through ``edit``, then compressed (by ``compress``, else one frame
    whose header gives its size or not: ``said``) into ``archived_sessions/`` of the
    Codex home ``codex``; (its path, its text)."""
    demo = load_demo_agents()
    plain = demo.rollout_path(codex, 1_780_000_000.0, CODEX_SESSION_ID, True)
    text = edit(demo.write_lines(plain, lines).read_bytes())
    path = plain.with_name(plain.name + ".zst")
    compressed = zstandard.ZstdCompressor(write_content_size=said).compress
    path.write_bytes((compress or compressed)(text))
    plain.unlink()
    return path, text


def codex_cache(codex: Path) -> tuple[OtherAgentIndex, SessionCache]:
    """The daemon's index of the Codex home ``codex`` and a cache of 64 MB loading its
    sessions as the daemon does."""
    index = OtherAgentIndex(catalog_for(AgentHome("codex", codex)))
    cache = SessionCache(
        index,
        64 << 20,
        new_session=lambda ref: LoadedSession(
            ref, opener=lambda r: open_agent_file("codex", r.path)
        ),
    )
    return index, cache
