"""Interop both ways with the real upstream pi agent (``@mariozechner/pi-coding-agent``).

pi's own ``SessionManager`` (driven by ``pi_roundtrip.mjs`` under Node) opens files core
wrote and must see the same entries, leaf, labels and context; files pi wrote must load
in core with the same. The package is installed once with npm into a cache dir
(``$SESSIONFS_PI_CACHE``, else ``<repo>/.cache/npm-pi``, git-ignored) and reused: see
`support.real_agents`, which also runs the whole pi CLI against a fake model.

What is normalised, and why (everything else is compared as is):

* blob refs: upstream pi has no blob store (the xcsh agents added it), so it shows an
  image block's ``blob:sha256:`` ref where core shows the bytes. pi's entries get their
  refs resolved from the agent dir's store before the comparison.
* keys whose value is null in core's context messages: pi leaves such fields
  ``undefined``, which JSON drops (``shortSummary``, ``details``).
* ``attribution`` of custom messages and ``shortSummary`` of the compaction summary:
  upstream pi's ``createCustomMessage`` / ``createCompactionSummaryMessage`` predate
  those xcsh fields and never copy them into the context (both stay in the entries,
  which are compared whole).
* the model: upstream pi reports ``model: {provider, modelId}`` of the last model
  change or assistant message; core reports the xcsh role map ``models``; the default
  role must name the same model.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import orjson
from support.agent_messages import assistant, user
from support.fixture_paths import fixture_path

from core import BlobStore, SessionManager, list_sessions
from core.persist import resolve_blob_refs

SCRIPT = Path(__file__).with_name("pi_roundtrip.mjs")
NODE_TIMEOUT_S = 60

Json = dict[str, Any]


def run_pi(pi_install: Path, *args: str) -> Any:
    done = subprocess.run(
        ["node", str(SCRIPT), str(pi_install), *args],
        capture_output=True,
        text=True,
        timeout=NODE_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, f"pi_roundtrip.mjs {args[0]} failed:\n{done.stderr}"
    return json.loads(done.stdout)


def pi_read(pi_install: Path, *files: Path) -> list[Json]:
    """How pi loads each file (one Node process for all of them)."""
    seen = run_pi(pi_install, "read", *(str(f) for f in files))
    assert isinstance(seen, list) and len(seen) == len(files)
    return seen


# --------------------------------------------------------------------------- normalising


def _without_nulls(message: Json) -> Json:
    return {k: v for k, v in message.items() if v is not None}


#: Context message fields the xcsh agents add and upstream pi does not build.
_XCSH_ONLY_MESSAGE_FIELDS = {"custom": "attribution", "compactionSummary": "shortSummary"}


def core_context_as_pi(context: Json) -> Json:
    messages = []
    for message in context["messages"]:
        plain = _without_nulls(message)
        xcsh_only = _XCSH_ONLY_MESSAGE_FIELDS.get(str(plain.get("role")))
        if xcsh_only is not None:
            plain.pop(xcsh_only, None)
        messages.append(plain)
    return {"messages": messages, "thinkingLevel": context["thinkingLevel"]}


def pi_context_plain(context: Json) -> Json:
    return {
        "messages": [_without_nulls(m) for m in context["messages"]],
        "thinkingLevel": context["thinkingLevel"],
    }


def pi_default_model(context: Json) -> str | None:
    model = context.get("model")
    return f"{model['provider']}/{model['modelId']}" if model else None


def pi_entries_with_blobs(entries: list[Json], blobs: BlobStore) -> list[Json]:
    for entry in entries:
        resolve_blob_refs(entry, blobs)
    return entries


def assert_same_session(pi: Json, manager: SessionManager, blobs: BlobStore) -> None:
    assert pi["header"] == manager.get_header()
    assert pi_entries_with_blobs(pi["entries"], blobs) == manager.get_entries()
    assert pi["leafId"] == manager.get_leaf_id()
    assert pi["labels"] == manager.get_labels()
    core_context = manager.build_session_context()
    assert pi_context_plain(pi["context"]) == core_context_as_pi(core_context)
    assert pi_default_model(pi["context"]) == core_context["models"].get("default")


# --------------------------------------------------------------------------- core -> pi

#: 3 KiB of image bytes: its base64 is over the 1024-char blob threshold.
PICTURE = bytes(range(256)) * 12


def _image_block() -> Json:
    import base64

    return {"type": "image", "data": base64.b64encode(PICTURE).decode(), "mimeType": "image/png"}


def write_branched_session(session_dir: Path) -> Path:
    """A session core writes: model/thinking changes, a left branch, labels, a
    compaction keeping a tail, a custom message, an image (stored as a blob)."""
    manager = SessionManager.create("/work/demo", session_dir)
    with manager:
        manager.append_model_change("anthropic/claude-x")
        manager.append_thinking_level_change("medium")
        # Newer xcsh entry types: upstream pi must keep them as entries it does not know.
        manager.append_service_tier_change("priority")
        manager.append_mcp_tool_selection(["mcp_docs_search"])
        u1 = manager.append_message(user("look at this picture"))
        manager.get_entry(u1)["message"]["content"].append(_image_block())
        a1 = manager.append_message(assistant("a fine picture"))
        manager.append_message(user("a branch to leave"))
        manager.append_message(assistant("left"))
        manager.branch(a1)
        manager.append_label_change(u1, "picture")
        u2 = manager.append_message(user("second question"))
        manager.append_message(assistant("second answer"))
        manager.append_label_change(a1, "answered")
        manager.append_compaction("summary by core", "short", u2, 4321)
        manager.append_custom_message_entry("note", "a custom note", True, {"k": 1})
        manager.append_message(user("after compaction"))
        manager.append_message(assistant("last answer"))
        file = manager.get_session_file()
    assert file is not None
    return Path(file)


def migrated_v1_fixture(session_dir: Path) -> Path:
    session_dir.mkdir(parents=True, exist_ok=True)
    target = session_dir / fixture_path("pi-v1-before-compaction.jsonl").name
    shutil.copyfile(fixture_path("pi-v1-before-compaction.jsonl"), target)
    SessionManager.open(target).close()  # open rewrites the migrated (v3) file at once
    return target


def write_sub_agent_session(parent_file: Path) -> Path:
    """A sub-agent run as the task tool writes it: `<stem>/<task-id>.jsonl`."""
    artifacts = parent_file.with_suffix("")
    artifacts.mkdir()
    task_file = artifacts / "0-Explore.jsonl"
    manager = SessionManager.open(task_file)
    with manager:
        manager.append_message(user("sub-agent task"))
        manager.append_message(assistant("sub-agent result"))
    return task_file


def test_pi_reads_what_core_wrote(pi_install: Path, tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    project = agent / "sessions" / "--work-demo--"
    branched = write_branched_session(project)
    migrated = migrated_v1_fixture(project)
    sub_agent = write_sub_agent_session(branched)
    assert b"blob:sha256:" in branched.read_bytes()  # the image really went to the store
    assert orjson.loads(migrated.read_bytes().split(b"\n", 1)[0])["version"] == 3
    blobs = BlobStore(agent / "blobs")
    for file, seen in zip(
        (branched, migrated, sub_agent),
        pi_read(pi_install, branched, migrated, sub_agent),
        strict=True,
    ):
        manager = SessionManager.open(file, browse=True)
        assert_same_session(seen, manager, blobs)
    # pi must not have rewritten anything it read (all files are already v3).
    assert SessionManager.open(migrated, browse=True).version == 3


# --------------------------------------------------------------------------- pi -> core


def test_core_reads_what_pi_wrote_and_pi_reads_cores_appends(
    pi_install: Path, tmp_path: Path
) -> None:
    agent = tmp_path / "agent"
    project = agent / "sessions" / "--work-pi--"
    written = run_pi(pi_install, "write", str(project), "/work/pi")
    file = Path(written["file"])
    blobs = BlobStore(agent / "blobs")
    manager = SessionManager.open(file, browse=True)
    (seen,) = pi_read(pi_install, file)
    assert manager.get_leaf_id() == written["leafId"]
    assert_same_session(seen, manager, blobs)
    context = manager.build_session_context()
    assert context["messages"][0]["role"] == "compactionSummary"
    assert context["messages"][0]["summary"] == "pi summary of the start"
    assert context["models"]["default"] == "anthropic/claude-test"
    assert context["thinkingLevel"] == "high"
    assert [s.path for s in list_sessions("/work/pi", project)] == [str(file)]

    # Core appends to pi's file; pi reads the result back the same way.
    with SessionManager.open(file) as writer:
        target = writer.append_message(user("core continues pi's session"))
        writer.append_message(assistant("and answers", provider="openai", model="gpt-x"))
        writer.append_label_change(target, "from core")
    reread = SessionManager.open(file, browse=True)
    (after,) = pi_read(pi_install, file)
    assert_same_session(after, reread, blobs)
    assert after["labels"][target] == "from core"
    assert pi_default_model(after["context"]) == "openai/gpt-x"
