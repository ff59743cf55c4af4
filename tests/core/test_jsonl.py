"""Lenient JSONL: what survives bad lines, torn tails, odd-but-valid JSON."""

from __future__ import annotations

import json
import tracemalloc

from core.jsonl import (
    BIG_LINE_BYTES,
    complete_prefix_length,
    dumps_line,
    dumps_pretty,
    load_entries_from_file,
    loads,
    parse_jsonl_lenient,
    parse_jsonl_report,
    parse_object_line,
)

HEADER = b'{"type":"session","id":"s1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}\n'


def test_bad_lines_are_skipped_and_the_rest_kept():
    data = HEADER + b'{"a":1}\nnot json\n[1,2]\n"str"\n\n   \n{"b":2}\n{"torn":'
    assert parse_jsonl_lenient(data)[1:] == [{"a": 1}, {"b": 2}]


def test_report_names_bad_lines_and_torn_tail():
    data = HEADER + b'{"a":1}\nnot json\n{"b":2}\n{"torn":'
    report = parse_jsonl_report(data)
    assert report.bad_lines == [3]
    assert report.torn_tail is True
    assert report.object_lines == [1, 2, 4]
    clean = parse_jsonl_report(HEADER + b'{"a":1}\n')
    assert clean.bad_lines == [] and clean.torn_tail is False


def test_valid_last_line_without_newline_is_kept():
    assert parse_jsonl_lenient(HEADER + b'{"a":1}')[-1] == {"a": 1}


def test_big_integers_and_lone_surrogates_round_trip():
    line = b'{"n":123456789012345678901234567890,"s":"\\ud800x"}'
    obj = loads(line)
    assert obj["n"] == 123456789012345678901234567890
    again = loads(dumps_line(obj))
    assert again == obj
    dumps_line(obj).decode("utf-8")  # still valid UTF-8 on disk


def test_dumps_line_is_one_compact_line_and_keeps_key_order():
    obj = {"z": 1, "a": {"y": [1, 2], "b": "é"}, "unknown": None}
    line = dumps_line(obj)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert list(loads(line)) == ["z", "a", "unknown"]
    assert line == json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


def test_dumps_pretty_indents_two_spaces():
    assert dumps_pretty({"a": [1]}) == b'{\n  "a": [\n    1\n  ]\n}\n'


def test_complete_prefix_length():
    assert complete_prefix_length(b"") == 0
    assert complete_prefix_length(b"abc") == 0
    assert complete_prefix_length(b"a\nb") == 2
    assert complete_prefix_length(b"a\nb\n") == 4


def test_load_entries_from_file(tmp_path):
    assert load_entries_from_file(tmp_path / "missing.jsonl") == []
    (tmp_path / "noheader.jsonl").write_bytes(b'{"type":"message","id":"a"}\n' + HEADER)
    assert load_entries_from_file(tmp_path / "noheader.jsonl") == []
    (tmp_path / "badid.jsonl").write_bytes(b'{"type":"session","id":5}\n')
    assert load_entries_from_file(tmp_path / "badid.jsonl") == []
    (tmp_path / "junk.jsonl").write_bytes(bytes(range(256)) * 10)
    assert load_entries_from_file(tmp_path / "junk.jsonl") == []
    # Junk before the header is skipped: the first *parsed* object is the header.
    (tmp_path / "ok.jsonl").write_bytes(b"\xff\xfe garbage\n" + HEADER + b'{"type":"x"}\n')
    assert [e["type"] for e in load_entries_from_file(tmp_path / "ok.jsonl")] == ["session", "x"]
    assert load_entries_from_file(tmp_path) == []  # a directory is not a session


def test_invalid_utf8_line_is_skipped_not_fatal():
    data = HEADER + b'{"a":"\xff\xfe"}\n{"b":1}\n'
    assert parse_jsonl_lenient(data)[1:] == [{"b": 1}]


def test_consumed_length_is_the_one_torn_line_rule() -> None:
    from core.jsonl import consumed_length

    assert consumed_length(b"") == 0
    assert consumed_length(b'{"a":1}\n') == 8
    assert consumed_length(b'{"a":1}\n{"b":') == 8  # torn: waits for its newline
    assert consumed_length(b'{"a":1}\n{"b":2}') == 15  # whole without newline: data
    assert consumed_length(b'{"a":1}\n  ') == 10  # blank tail: nothing to wait for
    assert consumed_length(b'{"a":1}\n[1]') == 8  # JSON but not an object: not an entry


def test_a_long_line_is_the_same_object_at_a_fraction_of_orjsons_memory():
    """Lines over `BIG_LINE_BYTES` (a tool output of megabytes) are read by json's parser
    first: the same objects as the short lines' orjson-first reading, odd values
    included, without orjson's work space of ~12 times the line."""
    text = r"output line\twith \"quotes\" and é and \ud83d\ude00\n" * 60_000
    pad = "x" * (BIG_LINE_BYTES + 1)
    lines = [
        ('{"type":"user","text":"' + text + '","n":1.5e300,"big":12345678901234567890}').encode(),
        ('{"lone":"\\udc80","pad":"' + pad + '"}').encode(),  # orjson refuses: json reads it
        ('{"a":1,"a":2,"pad":"' + pad + '"}').encode(),  # a key twice: the last wins
        ('["not an object","' + pad + '"]').encode(),
        ('{"torn":"' + pad).encode(),
        b"\xff" + pad.encode(),
    ]
    for line in lines:
        assert len(line) > BIG_LINE_BYTES
        try:
            expected = json.loads(line)
        except ValueError:
            expected = None
        got = parse_object_line(line)
        assert got == (expected if isinstance(expected, dict) else None)
    line = lines[0]
    tracemalloc.start()
    try:
        parse_object_line(line)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 * len(line)  # orjson's parse of it: ~12 times
