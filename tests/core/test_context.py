"""build_session_context, checked against spec section 9 case by case."""

from __future__ import annotations

from core.context import UNSET, build_session_context, context_sources, path_to_root
from core.paths import iso_to_ms

T = "2026-01-01T00:00:00.000Z"


def entry(id_, parent, type_="message", **fields):
    return {"type": type_, "id": id_, "parentId": parent, "timestamp": T, **fields}


def msg(id_, parent, role="user", text="hi", **extra):
    return entry(id_, parent, message={"role": role, "content": text, **extra})


def test_leaf_selection():
    entries = [msg("a", None, text="1"), msg("b", "a", text="2"), msg("c", "a", text="3")]
    texts = lambda ctx: [m["content"] for m in ctx["messages"]]  # noqa: E731
    assert texts(build_session_context(entries)) == ["1", "3"]
    assert texts(build_session_context(entries, "b")) == ["1", "2"]
    assert texts(build_session_context(entries, "unknown")) == ["1", "3"]
    assert build_session_context(entries, None)["messages"] == []
    assert build_session_context([], UNSET)["messages"] == []


def test_state_along_the_path():
    entries = [
        entry("a", None, "thinking_level_change", thinkingLevel="high"),
        entry("b", "a", "model_change", model="openai/gpt-5"),
        entry("c", "b", "model_change", model="x/small", role="smol"),
        msg("d", "c", "assistant", provider="anthropic", model="claude"),
        entry("e", "d", "ttsr_injection", injectedRules=["r1", "r2"]),
        entry("f", "e", "ttsr_injection", injectedRules=["r2", "r3"]),
        entry("g", "f", "mode_change", mode="plan", data={"k": 1}),
        entry("h", "g", "thinking_level_change", thinkingLevel=None),
    ]
    ctx = build_session_context(entries)
    assert ctx["thinkingLevel"] == "off"
    assert ctx["models"] == {"default": "anthropic/claude", "smol": "x/small"}
    assert ctx["injectedTtsrRules"] == ["r1", "r2", "r3"]
    assert ctx["mode"] == "plan" and ctx["modeData"] == {"k": 1}
    assert [m["role"] for m in ctx["messages"]] == ["assistant"]
    # An explicit change after the assistant message wins again.
    later = [*entries, entry("i", "h", "model_change", model="z/big")]
    assert build_session_context(later)["models"]["default"] == "z/big"
    assert build_session_context(entries, "a")["thinkingLevel"] == "high"


def test_v1_model_change_with_provider_and_model_id():
    entries = [entry("a", None, "model_change", provider="anthropic", modelId="opus")]
    assert build_session_context(entries)["models"] == {"default": "anthropic/opus"}


def test_custom_message_branch_summary_and_invisible_entries():
    entries = [
        msg("a", None),
        entry("b", "a", "custom_message", customType="note", content="c", display=True),
        entry("c", "b", "custom", customType="ext", data={}),
        entry("d", "c", "label", targetId="a", label="L"),
        entry("e", "d", "session_init", systemPrompt="p", task="t", tools=[]),
        entry("f", "e", "branch_summary", fromId="a", summary="went elsewhere"),
        entry("g", "f", "branch_summary", fromId="a", summary=""),
    ]
    messages = build_session_context(entries)["messages"]
    assert [m["role"] for m in messages] == ["user", "custom", "branchSummary"]
    assert messages[1] == {
        "role": "custom",
        "customType": "note",
        "content": "c",
        "display": True,
        "details": None,
        "attribution": None,
        "timestamp": iso_to_ms(T),
    }
    assert messages[2] == {
        "role": "branchSummary",
        "summary": "went elsewhere",
        "fromId": "a",
        "timestamp": iso_to_ms(T),
    }


def test_latest_compaction_keeps_tail_from_first_kept_entry():
    entries = [msg(x, p, text=x) for x, p in [("a", None), ("b", "a"), ("c", "b"), ("d", "c")]]
    entries += [
        entry("k1", "d", "compaction", summary="S1", firstKeptEntryId="b", tokensBefore=5),
        msg("e", "k1", text="e"),
        entry(
            "k2",
            "e",
            "compaction",
            summary="S2",
            shortSummary="s2",
            firstKeptEntryId="d",
            tokensBefore=9,
        ),
        msg("f", "k2", text="f"),
    ]
    messages = build_session_context(entries)["messages"]
    assert messages[0] == {
        "role": "compactionSummary",
        "summary": "S2",
        "shortSummary": "s2",
        "tokensBefore": 9,
        "timestamp": iso_to_ms(T),
    }
    assert [m["content"] for m in messages[1:]] == ["d", "e", "f"]
    # At a leaf before the second compaction only the first counts.
    assert [
        m.get("content", m.get("summary")) for m in build_session_context(entries, "e")["messages"]
    ] == ["S1", "b", "c", "d", "e"]


def test_compaction_whose_first_kept_entry_is_not_on_the_path_keeps_nothing_before():
    entries = [
        msg("a", None, text="a"),
        entry("k", "a", "compaction", summary="S", firstKeptEntryId="zzz", tokensBefore=1),
        msg("b", "k", text="b"),
    ]
    messages = build_session_context(entries)["messages"]
    assert [m["role"] for m in messages] == ["compactionSummary", "user"]


def test_cycles_terminate_and_deep_chains_do_not_recurse():
    cyclic = [msg("a", "c"), msg("b", "a"), msg("c", "b")]
    assert len(build_session_context(cyclic)["messages"]) == 3
    assert len(build_session_context([msg("a", "a")])["messages"]) == 1
    chain = [msg(f"{i:08x}", f"{i - 1:08x}" if i else None) for i in range(100_000)]
    ctx = build_session_context(chain)
    assert len(ctx["messages"]) == 100_000
    by_id = {e["id"]: e for e in chain}
    assert path_to_root(chain[500]["id"], by_id)[0] is chain[0]


def test_context_sources_name_the_entry_behind_each_message():
    entries = [msg(x, p, text=x) for x, p in [("a", None), ("b", "a"), ("c", "b")]]
    entries += [
        entry("k", "c", "compaction", summary="S", firstKeptEntryId="b", tokensBefore=5),
        entry("n", "k", "custom_message", customType="note", content="n", display=True),
        entry("l", "n", "label", targetId="a", label="L"),
        msg("d", "l", text="d"),
    ]
    messages = build_session_context(entries)["messages"]
    sources = context_sources(entries)
    assert [e["id"] for e in sources] == ["k", "b", "c", "n", "d"]
    assert len(sources) == len(messages)
    assert context_sources(entries, None) == [] and context_sources([]) == []
    assert [e["id"] for e in context_sources(entries, "b")] == ["a", "b"]
