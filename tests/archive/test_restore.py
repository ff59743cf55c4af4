"""``sessionfs restore SESSION`` puts a deleted session file back where its agent reads
it (with its sub-agent files), byte for byte, and never overwrites a file."""

from __future__ import annotations

import shutil
import stat
import subprocess
import sys
from pathlib import Path

import zstandard
from archive_helpers import SYNC_TIMEOUT, sync, user_env
from support.agent_files import last_assistant_text
from support.fake_model_server import FakeModelServer
from support.other_agents import fake_home
from support.real_agents import PiAgent


def restore(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "sessionfs", "restore", "--machine", "box", *args]
    return subprocess.run(
        command, capture_output=True, text=True, timeout=SYNC_TIMEOUT, env=user_env(home)
    )


def test_a_deleted_claude_session_comes_back_with_its_sub_agents(tmp_path: Path) -> None:
    trees = fake_home(tmp_path)
    session = trees.claude_session
    subagents = sorted((session.with_suffix("") / "subagents").glob("*.jsonl"))
    assert subagents
    wanted = {path: path.read_bytes() for path in [session, *subagents]}
    metas = sorted((session.with_suffix("") / "subagents").glob("*.meta.json"))
    assert metas
    # (a meta document is archived as one line: it comes back with a newline at its end)
    wanted |= {path: path.read_bytes().rstrip(b"\n") + b"\n" for path in metas}
    assert sync(trees.home).returncode == 0
    session.unlink()
    shutil.rmtree(session.with_suffix(""))  # what Claude's cleanup removes

    done = restore(trees.home, session.stem[:8])  # a unique prefix of its id
    assert done.returncode == 0, done.stderr
    assert {path: path.read_bytes() for path in wanted} == wanted
    assert stat.S_IMODE(session.stat().st_mode) == 0o600
    assert f"restored {session}" in done.stdout

    again = restore(trees.home, session.stem)
    assert again.returncode == 1 and "exists, left as it is" in again.stdout


def test_restore_never_overwrites_and_names_what_it_cannot_find(tmp_path: Path) -> None:
    trees = fake_home(tmp_path)
    rollout = trees.codex_rollout
    original = rollout.read_bytes()
    assert sync(trees.home).returncode == 0
    rollout.write_bytes(b'{"another":"file now"}\n')
    kept = restore(trees.home, rollout.stem)
    assert kept.returncode == 1 and rollout.read_bytes() == b'{"another":"file now"}\n'
    rollout.unlink()
    back = restore(trees.home, rollout.stem[-36:])  # its thread id
    assert back.returncode == 0, back.stderr
    assert rollout.read_bytes() == original
    archived = trees.codex / "archived_sessions" / (rollout.name + ".zst")
    archived.write_bytes(zstandard.ZstdCompressor().compress(rollout.read_bytes()))
    rollout.unlink()  # Codex archived it: moved and compressed, not deleted
    moved = restore(trees.home, rollout.stem)
    assert moved.returncode == 1 and f"left as it is: {archived}" in moved.stdout
    assert not rollout.exists()  # no second copy of the thread beside the archived one
    missing = restore(trees.home, "no-such-session")
    assert missing.returncode == 2 and "no session in the archive matches" in missing.stderr
    ambiguous = restore(trees.home, "rollout-")
    assert ambiguous.returncode == 2 and "say more" in ambiguous.stderr


def test_a_restored_pi_session_is_resumed_by_the_real_pi(
    pi_agent: PiAgent, fake_model: FakeModelServer, tmp_path: Path
) -> None:
    fake_model.reply_with("the first answer")
    pi_agent.run("the first question", cwd=tmp_path / "work").check()
    (session,) = pi_agent.sessions()
    archive = ["--store", f"file://{tmp_path / 'archive'}", "--agent-dir", str(pi_agent.agent_dir)]
    home = tmp_path / "user"
    assert sync(home, *archive, "--no-agents").returncode == 0
    original = session.read_bytes()
    session.unlink()  # deleted by hand, as omp and pi users do

    done = restore(home, *archive, session.stem.rpartition("_")[2])
    assert done.returncode == 0, done.stderr
    assert session.read_bytes() == original
    fake_model.reply_with("the second answer")
    pi_agent.run("the second question", session=session, cwd=tmp_path / "work").check()
    assert last_assistant_text(session) == "the second answer"
    (resumed,) = [r for r in fake_model.requests if r.mentions("the second question")]
    assert "the first answer" in resumed.texts()  # it went on from the restored file
