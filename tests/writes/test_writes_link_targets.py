"""Symlink targets written to leaf / labels/<name> -> entry ids."""

from __future__ import annotations

import errno

import pytest

from sessionfs.view.names import encode_name
from sessionfs.view.refusal import WriteRejected
from sessionfs.writes.link_targets import LABELS_DIR, SESSION_DIR, resolve_link_target

IDS = {"1a2b3c4d", "a/b", "50%", "..", "dup"}
MOUNTED = "/mnt/sessions/--work-demo--/2026-01-01T00-00-00-000Z_s1"


def resolve(target: str, link_dir: str = SESSION_DIR) -> str:
    return resolve_link_target(
        target, link_dir=link_dir, has_entry=IDS.__contains__, session_dirs=[MOUNTED]
    )


def rejected(target: str, link_dir: str = SESSION_DIR) -> int:
    with pytest.raises(WriteRejected) as info:
        resolve(target, link_dir)
    return info.value.errno


@pytest.mark.parametrize(
    "target",
    [
        "entries/1a2b3c4d.json",
        "./entries/1a2b3c4d.json",
        "entries/../entries/1a2b3c4d.json",
        "path/0000-1a2b3c4d.json",
        "./path/0017-1a2b3c4d.json",
        "1a2b3c4d",
        f"{MOUNTED}/entries/1a2b3c4d.json",
        f"{MOUNTED}/path/0002-1a2b3c4d.json",
        f"{MOUNTED}//entries/./1a2b3c4d.json",
    ],
)
def test_leaf_target_forms(target: str) -> None:
    assert resolve(target) == "1a2b3c4d"


@pytest.mark.parametrize(
    "target",
    [
        "../entries/1a2b3c4d.json",
        "../path/0003-1a2b3c4d.json",
        "1a2b3c4d",
        f"{MOUNTED}/entries/1a2b3c4d.json",
    ],
)
def test_label_target_forms_resolve_relative_to_labels_dir(target: str) -> None:
    assert resolve(target, LABELS_DIR) == "1a2b3c4d"


@pytest.mark.parametrize("entry_id", ["a/b", "50%", ".."])
def test_percent_encoded_names_decode_to_the_id(entry_id: str) -> None:
    name = encode_name(entry_id)
    assert resolve(f"entries/{name}.json") == entry_id
    assert resolve(f"../entries/{name}.json", LABELS_DIR) == entry_id
    assert resolve(f"path/0001-{name}.json") == entry_id


def test_bare_id_is_taken_as_typed_then_decoded() -> None:
    assert resolve("50%") == "50%"
    assert resolve("a%2Fb") == "a/b"


def test_duplicate_suffix_names_the_id() -> None:
    assert resolve("entries/dup~2.json") == "dup"


@pytest.mark.parametrize(
    "target",
    ["entries/ffffffff.json", "path/0000-ffffffff.json", "ffffffff", "header.json", "entries"],
)
def test_well_formed_but_unknown_is_enoent(target: str) -> None:
    assert rejected(target) == errno.ENOENT


@pytest.mark.parametrize(
    "target",
    [
        "",
        ".",
        "..",
        "../../../etc/passwd",
        "/etc/passwd",
        "../entries/1a2b3c4d.json",  # from the session dir this leaves it
        "entries/",
        "entries/1a2b3c4d",
        "entries/.json",
        "entries/sub/1a2b3c4d.json",
        "path/1a2b3c4d.json",
        "labels/1a2b3c4d.json",
        "blobs/1a2b3c4d.json",
        "/mnt/sessions/--work-demo--/other/entries/1a2b3c4d.json",
        f"{MOUNTED}/../other/entries/1a2b3c4d.json",
        f"{MOUNTED}",
        "1a2b\x00.json",
    ],
)
def test_anything_else_is_einval(target: str) -> None:
    assert rejected(target) == errno.EINVAL


def test_session_relative_form_is_not_an_entry_from_labels() -> None:
    # ln -s entries/x.json labels/n would be a dangling link on a real filesystem.
    assert rejected("entries/1a2b3c4d.json", LABELS_DIR) == errno.EINVAL
