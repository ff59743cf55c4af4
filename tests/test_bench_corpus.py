"""The scale-bench corpus generator (bench/corpus.py): its files are real sessions that
core loads, its probe words are exactly where the manifest says, it is deterministic,
and its cache regenerates only when the parameters change."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import orjson
import pytest

import core

REPO = Path(__file__).resolve().parents[1]


def _load_corpus_module() -> ModuleType:
    # bench/ is not an installed package: load the module from the checkout.
    spec = importlib.util.spec_from_file_location("bench_corpus", REPO / "bench" / "corpus.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


corpus = _load_corpus_module()


def _generate(root: Path, sessions: int, entries: int, rare: int) -> object:
    built, elapsed = corpus.ensure(corpus.CorpusParams(sessions, entries, rare_sessions=rare), root)
    assert elapsed is not None, "a new directory must be generated, not taken from the cache"
    return built


def test_tiny_corpus_loads_with_core_and_probe_words_are_where_promised(tmp_path: Path) -> None:
    built = _generate(tmp_path / "c", sessions=3, entries=20, rare=1)
    assert len(built.files) == 3
    rare = corpus.RARE_WORD.encode()
    with_rare = {str(f.relative_to(built.root)) for f in built.files if rare in f.read_bytes()}
    assert with_rare == set(built.sessions_with[corpus.RARE_WORD])
    assert len(with_rare) == 1
    assert len(built.sessions_with[corpus.COMMON_WORD]) == 3
    for path in built.files:
        assert len(core.load_entries_from_file(path)) == 21  # header + 20 entries
        manager = core.SessionManager.open(path, browse=True)
        assert manager.get_header()["version"] == 3
        assert len(manager.get_entries()) == 20
        # The probe words are on the leaf path: the context holds them as raw grep does.
        context = orjson.dumps(manager.build_session_context())
        for word, names in built.sessions_with.items():
            promised = str(path.relative_to(built.root)) in names
            assert (word.encode() in context) == promised, (path.name, word)


def test_corpus_has_every_entry_kind_and_resolvable_blobs(tmp_path: Path) -> None:
    built = _generate(tmp_path / "c", sessions=30, entries=60, rare=3)
    kinds: set[str] = set()
    refs: set[str] = set()
    for path in built.files:
        for entry in core.load_entries_from_file(path)[1:]:
            kinds.add(entry["type"])
            message = entry.get("message") or {}
            kinds.add(f"role:{message.get('role')}")
        parts = path.read_bytes().split(b"blob:sha256:")[1:]
        refs.update(part.split(b'"')[0].decode() for part in parts)
    assert {
        "message",
        "compaction",
        "branch_summary",
        "label",
        "model_change",
        "thinking_level_change",
        "role:user",
        "role:assistant",
        "role:toolResult",
    } <= kinds
    assert refs, "some user prompts carry an image moved to the blob store"
    for sha in refs:
        assert (built.agent_dir / "blobs" / sha).is_file()
    # Sessions spread over project dirs like a real agent dir.
    assert len({f.parent.name for f in built.files}) == 20


def test_corpus_is_deterministic_and_cached_by_parameters(tmp_path: Path) -> None:
    first = _generate(tmp_path / "a", sessions=2, entries=15, rare=1)
    second = _generate(tmp_path / "b", sessions=2, entries=15, rare=1)
    assert [f.read_bytes() for f in first.files] == [f.read_bytes() for f in second.files]

    params = corpus.CorpusParams(2, 15, rare_sessions=1)
    cached, elapsed = corpus.ensure(params, tmp_path / "a")
    assert elapsed is None and cached.files == first.files

    bigger, elapsed = corpus.ensure(corpus.CorpusParams(2, 25, rare_sessions=1), tmp_path / "a")
    assert elapsed is not None
    assert len(core.load_entries_from_file(bigger.files[0])) == 26


def test_corpus_refuses_to_wipe_a_directory_it_did_not_make(tmp_path: Path) -> None:
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep me")
    with pytest.raises(SystemExit, match="holds no bench corpus"):
        corpus.ensure(corpus.CorpusParams(1, 5), foreign)
    assert (foreign / "notes.txt").read_text() == "keep me"
