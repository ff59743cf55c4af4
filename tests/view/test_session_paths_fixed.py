"""`AgentIndex.session_paths_fixed`: each index kind says whether a node may keep the
session file it was given (`RenderedFile.session_file`); a kind that does not say is
refused when it is defined, so a new agent's index cannot inherit a wrong answer."""

from __future__ import annotations

from pathlib import Path

import pytest

from sessionfs.fs.mirrored_index import MirroredAgentIndex
from sessionfs.view.agent_index import AgentIndex
from sessionfs.view.archived_index import ArchivedAgentIndex
from sessionfs.view.other_agent_index import OtherAgentIndex

KINDS = [AgentIndex, ArchivedAgentIndex, MirroredAgentIndex, OtherAgentIndex]


@pytest.mark.parametrize("kind", KINDS, ids=lambda kind: kind.__name__)
def test_each_index_kind_declares_it_and_keeps_the_old_answer(kind: type[AgentIndex]) -> None:
    assert "session_paths_fixed" in vars(kind)
    # The rule it replaces: fixed exactly when `session_path` is the names-only one.
    assert kind.session_paths_fixed is (kind.session_path is AgentIndex.session_path)


def test_another_agents_index_is_not_fixed() -> None:
    assert OtherAgentIndex.session_paths_fixed is False


def test_a_kind_that_does_not_declare_it_is_refused() -> None:
    with pytest.raises(TypeError, match="session_paths_fixed"):

        class FoundItsOwnWay(AgentIndex):
            def session_path(self, project: str, stem: str) -> Path:
                return Path("/elsewhere") / project / stem


def test_a_kind_that_declares_it_is_taken_at_its_word(tmp_path: Path) -> None:
    class FoundItsOwnWay(AgentIndex):
        session_paths_fixed = False

        def session_path(self, project: str, stem: str) -> Path:
            return tmp_path / project / stem

    assert FoundItsOwnWay(tmp_path).session_paths_fixed is False
