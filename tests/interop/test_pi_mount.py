"""The real pi 0.73 continues sessions the mount creates in its agent dir.

pi 0.73 cannot read omp 18's title slot: a file that starts with one is no session to
it. So in an agent dir whose sessions are pi's (no slots), the files ``ctl new`` and
``fork`` create must stay slot-free, and pi must continue them: ``pi -p --session FILE``
appends its turn to that very file, under the header the mount wrote.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.agent_files import lines_of, said
from support.fake_model_server import FakeModelServer
from support.mount import MountFactory, run
from support.real_agents import PiAgent
from support.write_setup import read_ctl

pytestmark = pytest.mark.fuse


def assert_pi_continues(pi: PiAgent, fake_model: FakeModelServer, file: Path, cwd: Path) -> None:
    header = lines_of(file)[0]
    assert header["type"] == "session"  # no title slot: pi 0.73 reads the header first
    answer = f"pi answers in {file.name}"
    fake_model.reply_with(answer)
    pi.run("pi continues here", session=file, cwd=cwd).check()
    assert lines_of(file)[0] == header  # the same session, not a new one over it
    assert said(file)[-2:] == [("user", "pi continues here"), ("assistant", answer)]


def test_pi_continues_sessions_made_by_ctl_new_and_fork(
    pi_agent: PiAgent, fake_model: FakeModelServer, mount_factory: MountFactory, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    project_dir = pi_agent.agent_dir / "sessions" / "pi-project"
    project_dir.mkdir(parents=True)
    file = project_dir / "first.jsonl"
    fake_model.reply_with("pi's first answer")
    pi_agent.run("pi's first question", session=file, cwd=work).check()
    mount = mount_factory(pi_agent.agent_dir)

    run("sh", "-c", f"echo 'new {work} Made for pi' > ctl", cwd=mount.path)
    new_dir = Path(read_ctl(mount.path)["last_result"])
    made = Path(read_ctl(new_dir)["file"])
    assert made.is_file() and made.is_relative_to(pi_agent.agent_dir)
    assert_pi_continues(pi_agent, fake_model, made, work)

    session = next(d for d in (mount.path / "sessions" / "pi-project").iterdir())
    run("sh", "-c", "echo fork > ctl", cwd=session)
    forked = Path(read_ctl(Path(read_ctl(session)["last_result"]))["file"])
    assert forked != file and forked.is_file()
    assert ("user", "pi's first question") in said(forked)
    assert_pi_continues(pi_agent, fake_model, forked, work)
