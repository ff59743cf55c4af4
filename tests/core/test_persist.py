"""The persisted copy: truncation, dropped keys, lineCount, blob externalisation."""

from __future__ import annotations

import base64
import copy
import hashlib
import logging

from hypothesis import given
from hypothesis import strategies as st

from core.blobs import BLOB_REF_PREFIX, BlobStore
from core.persist import (
    MAX_PERSIST_CHARS,
    TRUNCATION_NOTICE,
    blob_refs_in,
    prepare_for_persist,
    resolve_blob_refs,
    truncate_for_persist,
)


def utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def test_long_strings_are_cut_with_notice_and_input_is_untouched():
    big = "x" * (MAX_PERSIST_CHARS + 10)
    entry = {"type": "message", "message": {"role": "user", "content": big}}
    original = copy.deepcopy(entry)
    out = prepare_for_persist(entry, None)
    assert entry == original
    text = out["message"]["content"]
    assert text.endswith(TRUNCATION_NOTICE) and len(text) == MAX_PERSIST_CHARS
    exactly = "y" * MAX_PERSIST_CHARS
    assert prepare_for_persist({"s": exactly}, None)["s"] is exactly


def test_cut_never_splits_a_surrogate_pair():
    keep = MAX_PERSIST_CHARS - len(TRUNCATION_NOTICE)
    # An emoji straddles the cut point (2 UTF-16 units at keep-1 .. keep).
    text = "a" * (keep - 1) + "😀" * 10 + "b" * MAX_PERSIST_CHARS
    cut = truncate_for_persist(text)
    assert cut is not None and cut == "a" * (keep - 1) + TRUNCATION_NOTICE
    cut.encode("utf-8")  # valid text, no lone surrogate
    # Length is measured in UTF-16 units like the agents: 300k emoji = 600k units.
    assert truncate_for_persist("😀" * 300_000) is not None
    assert utf16_len(truncate_for_persist("😀" * 300_000)) <= MAX_PERSIST_CHARS


def test_signatures_are_emptied_not_cut():
    sig = "s" * (MAX_PERSIST_CHARS + 1)
    block = {"thinkingSignature": sig, "thoughtSignature": sig, "textSignature": sig, "x": sig}
    out = prepare_for_persist({"content": [block]}, None)["content"][0]
    assert out["thinkingSignature"] == out["thoughtSignature"] == out["textSignature"] == ""
    assert out["x"].endswith(TRUNCATION_NOTICE)


def test_partial_json_and_jsonl_events_are_dropped_at_any_depth():
    entry = {"a": {"partialJson": "{", "b": [{"jsonlEvents": [1], "c": 1}]}, "partialJson": 1}
    assert prepare_for_persist(entry, None) == {"a": {"b": [{"c": 1}]}}


def test_line_count_follows_truncated_content():
    content = "line\n" * (MAX_PERSIST_CHARS // 5 + 10)
    out = prepare_for_persist({"details": {"content": content, "lineCount": 999999}}, None)
    new = out["details"]["content"]
    assert out["details"]["lineCount"] == len(new.split("\n"))
    untouched = prepare_for_persist({"content": "a\nb", "lineCount": 7}, None)
    assert untouched["lineCount"] == 7


def image_entry(data: str) -> dict:
    return {
        "type": "message",
        "message": {
            "role": "user",
            "content": [{"type": "image", "data": data, "mimeType": "image/png"}],
        },
    }


def test_large_images_go_to_the_blob_store_and_come_back(tmp_path):
    store = BlobStore(tmp_path / "blobs")
    raw = bytes(range(256)) * 8
    data = base64.b64encode(raw).decode()
    assert len(data) >= 1024
    entry = image_entry(data)
    out = prepare_for_persist(entry, store)
    sha = hashlib.sha256(raw).hexdigest()
    assert out["message"]["content"][0]["data"] == BLOB_REF_PREFIX + sha
    assert (tmp_path / "blobs" / sha).read_bytes() == raw
    assert entry["message"]["content"][0]["data"] == data  # memory keeps base64
    assert blob_refs_in(out) == [sha]
    assert resolve_blob_refs(out, store) == 0
    assert out == entry


def test_small_images_and_non_base64_stay_inline(tmp_path):
    store = BlobStore(tmp_path)
    small = base64.b64encode(b"x" * 100).decode()
    assert prepare_for_persist(image_entry(small), store) == image_entry(small)
    junk = "!" * 2000
    assert prepare_for_persist(image_entry(junk), store) == image_entry(junk)
    assert list(tmp_path.iterdir()) == []


def test_image_url_data_urls_are_stored_whole(tmp_path):
    store = BlobStore(tmp_path)
    url = "data:image/png;base64," + base64.b64encode(b"png-bytes").decode()
    entry = {"type": "custom_message", "content": [{"type": "image_url", "image_url": url}]}
    out = prepare_for_persist(entry, store)
    ref = out["content"][0]["image_url"]
    assert ref == BLOB_REF_PREFIX + hashlib.sha256(url.encode()).hexdigest()
    resolve_blob_refs(out, store)
    assert out["content"][0]["image_url"] == url


def test_missing_blob_warns_and_keeps_the_ref(tmp_path, caplog):
    ref = BLOB_REF_PREFIX + "b" * 64
    entry = image_entry(ref)
    with caplog.at_level(logging.WARNING):
        assert resolve_blob_refs(entry, BlobStore(tmp_path)) == 1
    assert entry["message"]["content"][0]["data"] == ref
    assert "missing" in caplog.text


def test_only_message_entries_are_resolved(tmp_path):
    store = BlobStore(tmp_path)
    _, _, ref = store.put(b"abc")
    other = {"type": "custom", "data": {"type": "image", "data": ref}}
    assert resolve_blob_refs(other, store) == 0
    assert other["data"]["data"] == ref


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=20),
        lambda children: (
            st.lists(children, max_size=4)
            | st.dictionaries(st.text(max_size=8), children, max_size=4)
        ),
        max_leaves=30,
    )
)
def test_small_values_persist_unchanged(value):
    def strip(v):
        if isinstance(v, dict):
            return {k: strip(x) for k, x in v.items() if k not in ("partialJson", "jsonlEvents")}
        if isinstance(v, list):
            return [strip(x) for x in v]
        return v

    assert prepare_for_persist({"v": value}, None) == {"v": strip(value)}
