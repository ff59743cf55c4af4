"""append/ drop-box parsing: shapes, per-type checks, refusals (no session needed)."""

from __future__ import annotations

import errno
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.jsonl import dumps_line
from sessionfs.view.refusal import WriteRejected
from sessionfs.writes.append_parse import (
    ASSIGNED_FIELDS,
    ENTRY_TYPES,
    MAX_APPEND_BYTES,
    entry_op,
    parse_append,
    reject_oversize,
)

NOW = 1_234_567


def parse(name: str, data: bytes | str) -> list[Any]:
    raw = data.encode() if isinstance(data, str) else data
    return parse_append(name, raw, now_ms=lambda: NOW)


def refused(name: str, data: bytes | str) -> WriteRejected:
    with pytest.raises(WriteRejected) as info:
        parse(name, data)
    return info.value


#: A minimal valid body for every type the mount appends through an append_* method.
MINIMAL: dict[str, dict[str, Any]] = {
    "message": {"message": {"role": "user", "content": "x"}},
    "thinking_level_change": {"thinkingLevel": "high"},
    "model_change": {"model": "anthropic/claude"},
    "compaction": {"summary": "s", "firstKeptEntryId": "abcd1234", "tokensBefore": 5},
    "branch_summary": {"fromId": "root", "summary": "s"},
    "custom": {"customType": "ext"},
    "custom_message": {"customType": "ext", "content": "c", "display": True},
    "label": {"targetId": "abcd1234", "label": "l"},
    "ttsr_injection": {"injectedRules": ["r1"]},
    "session_init": {"systemPrompt": "p", "task": "t", "tools": []},
    "mode_change": {"mode": "plan"},
}


def test_minimal_table_covers_every_entry_type() -> None:
    assert set(MINIMAL) == set(ENTRY_TYPES)


def test_text_file_is_one_user_message_without_the_shell_newline() -> None:
    (op,) = parse("note.txt", "fix the bug; then $(rm -rf /)\n")
    assert op.entry_type == "message"
    assert op.body["message"] == {
        "role": "user",
        "content": [{"type": "text", "text": "fix the bug; then $(rm -rf /)"}],
        "timestamp": NOW,
    }


def test_markdown_name_is_text_case_insensitively_and_keeps_inner_newlines() -> None:
    (op,) = parse("PLAN.MD", "# plan\n\n- a\n- b\n\n")
    assert op.body["message"]["content"][0]["text"] == "# plan\n\n- a\n- b\n"


def test_text_looking_like_json_stays_text() -> None:
    (op,) = parse("x.txt", '{"type": "label"}')
    assert op.body["message"]["content"][0]["text"] == '{"type": "label"}'


@pytest.mark.parametrize("data", [b"", b"\n", b"   \n\t\n"])
def test_empty_text_is_refused(data: bytes) -> None:
    assert refused("x.txt", data).errno == errno.EINVAL


def test_non_utf8_is_refused() -> None:
    assert refused("x.txt", b"\xff\xfe").errno == errno.EINVAL
    assert refused("x.json", b'{"role":"user","content":"\xff"}').errno == errno.EINVAL


def test_bare_agent_message_gets_a_timestamp_when_missing() -> None:
    pretty = orjson.dumps({"role": "user", "content": "hi"}, option=orjson.OPT_INDENT_2)
    (op,) = parse("m.json", pretty)
    assert op.entry_type == "message"
    assert op.body["message"] == {"role": "user", "content": "hi", "timestamp": NOW}


def test_message_timestamp_is_kept_when_given_and_checked() -> None:
    (op,) = parse("m", '{"role":"assistant","content":[],"timestamp":42}')
    assert op.body["message"]["timestamp"] == 42
    assert refused("m", '{"role":"user","content":"x","timestamp":"now"}').errno == errno.EINVAL


def test_typed_message_body_is_checked_like_a_bare_one() -> None:
    (op,) = parse("m", '{"type":"message","message":{"role":"user","content":"x"}}')
    assert op.body["message"]["timestamp"] == NOW
    assert refused("m", '{"type":"message","message":{"content":"x"}}').errno == errno.EINVAL
    assert refused("m", '{"type":"message","message":"hi"}').errno == errno.EINVAL


def test_json_lines_in_order_with_line_numbers_and_blank_lines_skipped() -> None:
    data = (
        '{"role":"user","content":"a"}\n'
        "\n"
        '{"type":"model_change","model":"p/m","role":"smol"}\r\n'
        '{"type":"custom","customType":"ext","data":{"k":[1,2]}}'
    )
    ops = parse("batch.jsonl", data)
    assert [op.entry_type for op in ops] == ["message", "model_change", "custom"]
    assert [op.line for op in ops] == [1, 3, 4]
    assert ops[1].body == {"model": "p/m", "role": "smol"}
    assert ops[2].body == {"customType": "ext", "data": {"k": [1, 2]}}


def test_utf8_bom_is_ignored() -> None:
    (op,) = parse("m.json", b'\xef\xbb\xbf{"role":"user","content":"x"}')
    assert op.entry_type == "message"


def test_invalid_json_line_names_the_line() -> None:
    error = refused("b.jsonl", '{"role":"user","content":"a"}\n{"role": oops}\n')
    assert error.errno == errno.EINVAL
    assert "line 2" in error.reason


@pytest.mark.parametrize(
    "data",
    ["[1, 2]", "42", '"text"', "null", '{"role":"user","content":"a"}\n[1]', "{}", '{"x": 1}'],
)
def test_anything_but_objects_with_type_or_role_is_refused(data: str) -> None:
    assert refused("x.json", data).errno == errno.EINVAL


@pytest.mark.parametrize("data", [b"", b"  \n\n"])
def test_empty_json_file_is_refused(data: bytes) -> None:
    assert refused("x.json", data).errno == errno.EINVAL


@pytest.mark.parametrize("entry_type", sorted(MINIMAL))
def test_every_type_parses_with_its_required_fields(entry_type: str) -> None:
    (op,) = parse("e.json", orjson.dumps({"type": entry_type, **MINIMAL[entry_type]}))
    assert op.entry_type == entry_type


@pytest.mark.parametrize(
    ("entry_type", "field"),
    [(t, f) for t, kind in sorted(ENTRY_TYPES.items()) for f in kind.required],
)
def test_a_missing_required_field_is_refused(entry_type: str, field: str) -> None:
    body = {"type": entry_type, **MINIMAL[entry_type]}
    del body[field]
    error = refused("e.json", orjson.dumps(body))
    assert error.errno == errno.EINVAL
    assert field in error.reason


@pytest.mark.parametrize("field", ASSIGNED_FIELDS)
@pytest.mark.parametrize("entry_type", ["custom", "label", "some_future_type"])
def test_fields_the_mount_assigns_are_refused(entry_type: str, field: str) -> None:
    body = {"type": entry_type, **MINIMAL.get(entry_type, {}), field: "x"}
    error = refused("e.json", orjson.dumps(body))
    assert error.errno == errno.EINVAL
    assert field in error.reason


@pytest.mark.parametrize(
    "body",
    [
        {"type": "custom_message", "customType": "e", "content": "c", "display": "yes"},
        {"type": "compaction", "summary": "s", "firstKeptEntryId": "a", "tokensBefore": True},
        {"type": "ttsr_injection", "injectedRules": ["a", 1]},
        {"type": "model_change", "model": ""},
        {"type": "label", "targetId": "a", "label": 3},
        {"type": "mode_change", "mode": "plan", "data": [1]},
        {"type": "custom_message", "customType": "e", "content": [1], "display": True},
        {"type": "session_init", "systemPrompt": "p", "task": "t", "tools": "all"},
        {"type": 7},
    ],
)
def test_wrong_field_types_are_refused(body: dict[str, Any]) -> None:
    assert refused("e.json", orjson.dumps(body)).errno == errno.EINVAL


def test_unknown_field_on_a_known_type_is_refused_not_dropped() -> None:
    error = refused("e.json", '{"type":"branch_summary","fromId":"root","sumary":"typo"}')
    assert error.errno == errno.EINVAL


def test_unknown_type_is_kept_verbatim_for_the_generic_append() -> None:
    (op,) = parse("e.json", '{"type":"context_change","anything":{"n":1},"more":[true]}')
    assert op.entry_type == "context_change"
    assert op.body == {"type": "context_change", "anything": {"n": 1}, "more": [True]}


@pytest.mark.parametrize("entry_type", ["session", ""])
def test_header_or_empty_type_is_refused(entry_type: str) -> None:
    assert refused("e.json", orjson.dumps({"type": entry_type})).errno == errno.EINVAL


def test_referenced_ids_are_listed_for_the_writer_to_check() -> None:
    ops = parse(
        "r.jsonl",
        '{"type":"label","targetId":"t1"}\n'
        '{"type":"branch_summary","fromId":"root","summary":"s"}\n'
        '{"type":"branch_summary","fromId":"f1","summary":"s"}\n'
        '{"type":"compaction","summary":"s","firstKeptEntryId":"k1","tokensBefore":1}\n'
        '{"role":"user","content":"x"}\n',
    )
    assert [op.referenced_ids() for op in ops] == [
        [("targetId", "t1")],
        [],
        [("fromId", "f1")],
        [("firstKeptEntryId", "k1")],
        [],
    ]


def test_entry_op_checks_like_a_dropped_file() -> None:
    op = entry_op({"type": "branch_summary", "fromId": "root", "summary": "s"})
    assert op.entry_type == "branch_summary"
    with pytest.raises(WriteRejected):
        entry_op({"type": "branch_summary", "fromId": "root"})


def test_size_limit_is_efbig_above_64_mib_only() -> None:
    reject_oversize(MAX_APPEND_BYTES)
    with pytest.raises(WriteRejected) as info:
        reject_oversize(MAX_APPEND_BYTES + 1)
    assert info.value.errno == errno.EFBIG


def test_oversized_content_is_efbig_before_parsing() -> None:
    data = b" " * (MAX_APPEND_BYTES + 1)
    assert refused("big.json", data).errno == errno.EFBIG
    assert refused("big.txt", data).errno == errno.EFBIG


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=5)
    ),
    max_leaves=20,
)
entry_like = st.dictionaries(
    st.sampled_from(["type", "role", "id", "message", "content", "label", "targetId", "x"]),
    json_values,
    max_size=5,
).map(lambda d: {**d, "type": d["type"]} if isinstance(d.get("type"), str) else d)


@settings(max_examples=300, deadline=None)
@given(st.one_of(json_values, entry_like), st.sampled_from(["a.json", "b.jsonl", "c.txt"]))
def test_any_json_is_parsed_or_refused_with_einval(value: Any, name: str) -> None:
    data = dumps_line(value)  # falls back to the stdlib for integers beyond 64 bits
    try:
        ops = parse("x", data) if not name.endswith(".txt") else parse(name, data)
    except WriteRejected as exc:
        assert exc.errno == errno.EINVAL and exc.reason
        return
    assert ops and all(op.entry_type for op in ops)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_any_bytes_are_parsed_or_refused_with_einval(data: bytes) -> None:
    try:
        parse("junk.jsonl", data)
    except WriteRejected as exc:
        assert exc.errno == errno.EINVAL
