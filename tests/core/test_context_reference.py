"""build_session_context and context_sources against a slow, literal reading of spec
section 9 on random entry forests (parent cycles, dangling parents, duplicate ids,
compactions whose kept entry is elsewhere, OpenAI remote compactions, state entries).

core.context takes shortcuts for speed (one pass, no seen-set unless the walk runs
long, the assistant's model written once); this pins that the results never differ.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from core.context import UNSET, build_session_context, context_sources, path_to_root
from core.paths import iso_to_ms

Entry = dict[str, Any]
T = "2026-01-01T00:00:00.000Z"
IDS = [f"e{i}" for i in range(32)]


# ----------------------------------------------------------------------- the reference


def reference_path(leaf_id: Any, by_id: dict[str, Entry]) -> list[Entry]:
    path, seen = [], set()
    current = by_id.get(leaf_id) if isinstance(leaf_id, str) else None
    while current is not None and isinstance(current.get("id"), str):
        if current["id"] in seen:
            break
        seen.add(current["id"])
        path.insert(0, current)
        parent = current.get("parentId")
        current = by_id.get(parent) if isinstance(parent, str) else None
    return path


def reference_message(entry: Entry) -> dict[str, Any] | None:
    kind = entry.get("type")
    if kind == "message":
        return entry["message"] if isinstance(entry.get("message"), dict) else None
    if kind == "custom_message":
        keys = ("customType", "content", "display", "details", "attribution")
        return {
            "role": "custom",
            **{k: entry.get(k) for k in keys},
            "timestamp": iso_to_ms(entry.get("timestamp")),
        }
    if kind == "branch_summary" and entry.get("summary"):
        return {
            "role": "branchSummary",
            "summary": entry["summary"],
            "fromId": entry.get("fromId"),
            "timestamp": iso_to_ms(entry.get("timestamp")),
        }
    return None


def remote_payload(entry: Entry) -> dict[str, Any] | None:
    remote = (entry.get("preserveData") or {}).get("openaiRemoteCompaction")
    if not isinstance(remote, dict):
        return None
    provider, items = remote.get("provider"), remote.get("replacementHistory")
    if not isinstance(provider, str) or not provider or not isinstance(items, list):
        return None
    return {"type": "openaiResponsesHistory", "provider": provider, "items": items}


def reference_state(path: list[Entry]) -> dict[str, Any]:
    state: dict[str, Any] = {
        "thinkingLevel": "off",
        "models": {},
        "mode": "none",
        "modeData": None,
        "serviceTier": None,
        "activeContextName": None,
        "activeContextTenant": None,
        "selectedMCPToolNames": [],
        "hasPersistedMCPToolSelection": False,
    }
    rules: list[str] = []
    for e in path:
        kind = e.get("type")
        if kind == "thinking_level_change":
            state["thinkingLevel"] = e.get("thinkingLevel") or "off"
        elif kind == "model_change":
            model = e.get("model")
            if (
                not isinstance(model, str)
                and isinstance(e.get("provider"), str)
                and isinstance(e.get("modelId"), str)
            ):
                model = f"{e['provider']}/{e['modelId']}"
            if isinstance(model, str):
                role = e.get("role")
                state["models"][role if isinstance(role, str) else "default"] = model
        elif kind == "message" and isinstance(e.get("message"), dict):
            m = e["message"]
            if m.get("role") == "assistant" and None not in (m.get("provider"), m.get("model")):
                state["models"]["default"] = f"{m['provider']}/{m['model']}"
        elif kind == "ttsr_injection":
            for rule in e.get("injectedRules") or []:
                if rule not in rules:
                    rules.append(rule)
        elif kind == "mode_change":
            state["mode"], state["modeData"] = e.get("mode", "none"), e.get("data")
        elif kind == "service_tier_change":
            state["serviceTier"] = e.get("serviceTier")
        elif kind == "mcp_tool_selection":
            state["selectedMCPToolNames"] = list(e.get("selectedToolNames") or [])
            state["hasPersistedMCPToolSelection"] = True
    state["injectedTtsrRules"] = rules
    return state


def reference_pairs(path: list[Entry]) -> list[tuple[Entry, dict[str, Any]]]:
    compactions = [i for i, e in enumerate(path) if e.get("type") == "compaction"]
    if not compactions:
        visible, pairs = path, []
    else:
        at = compactions[-1]
        c = path[at]
        ids = [e.get("id") for e in path[:at]]
        start = ids.index(c.get("firstKeptEntryId")) if c.get("firstKeptEntryId") in ids else at
        if remote_payload(c) is not None:
            start = at
        summary = {
            "role": "compactionSummary",
            "summary": c.get("summary", ""),
            "shortSummary": c.get("shortSummary"),
            "tokensBefore": c.get("tokensBefore"),
            "timestamp": iso_to_ms(c.get("timestamp")),
        }
        if remote_payload(c) is not None:
            summary["providerPayload"] = remote_payload(c)
        visible, pairs = path[start:at] + path[at + 1 :], [(c, summary)]
    return pairs + [(e, m) for e in visible if (m := reference_message(e)) is not None]


def reference_context(entries: list[Entry], leaf_id: Any) -> tuple[dict[str, Any], list[Entry]]:
    by_id = {e["id"]: e for e in entries if isinstance(e.get("id"), str)}
    if leaf_id is None or not entries:
        return {**reference_state([]), "messages": []}, []
    leaf = by_id.get(leaf_id) if isinstance(leaf_id, str) else None
    leaf = leaf if leaf is not None else entries[-1]
    path = reference_path(leaf.get("id"), by_id) or [leaf]
    pairs = reference_pairs(path)
    return {**reference_state(path), "messages": [m for _, m in pairs]}, [e for e, _ in pairs]


# ----------------------------------------------------------------------- random forests

ids = st.sampled_from(IDS)
parents = st.one_of(st.none(), ids, st.just("missing"), st.just(["unhashable"]))
REMOTE = {"openaiRemoteCompaction": {"provider": "openai", "replacementHistory": [{"k": 1}]}}
NOT_REMOTE = {"openaiRemoteCompaction": {"provider": "", "replacementHistory": []}}
#: Entry bodies, concrete so that every draw is one of a few telling cases.
MESSAGES = [
    {"type": "message", "message": {"role": "user", "content": "u"}},
    {"type": "message", "message": {"role": "assistant", "provider": "anthropic", "model": "m1"}},
    {"type": "message", "message": {"role": "assistant", "provider": "openai", "model": "m2"}},
    {"type": "message", "message": {"role": "assistant", "provider": "openai"}},
    {"type": "message", "message": "not a dict"},
    {"type": "message", "message": None},
    {"type": "message"},  # no message at all
]
OTHERS = [
    {"type": "model_change", "model": "x/a"},
    {"type": "model_change", "model": "y/b", "role": "smol"},
    {"type": "model_change", "model": "z/c", "role": "default"},
    {"type": "model_change", "provider": "p", "modelId": "q"},
    {"type": "model_change"},
    {"type": "thinking_level_change", "thinkingLevel": "high"},
    {"type": "thinking_level_change", "thinkingLevel": None},
    {"type": "compaction", "summary": "S", "firstKeptEntryId": "e3", "tokensBefore": 7},
    {"type": "compaction", "summary": "T", "shortSummary": "t", "firstKeptEntryId": "e5"},
    {"type": "compaction", "summary": "S", "tokensBefore": 7, "preserveData": REMOTE},
    {"type": "compaction", "summary": "S", "firstKeptEntryId": "e1", "preserveData": NOT_REMOTE},
    {"type": "custom_message", "customType": "n", "content": "c", "display": True},
    {"type": "branch_summary", "fromId": "e0", "summary": "went"},
    {"type": "branch_summary", "fromId": "e0", "summary": ""},
    {"type": "ttsr_injection", "injectedRules": ["r2", "r1", "r2"]},
    {"type": "ttsr_injection", "injectedRules": ["r3", "r1"]},
    {"type": "mode_change", "mode": "plan", "data": {"k": 1}},
    {"type": "service_tier_change", "serviceTier": "flex"},
    {"type": "service_tier_change", "serviceTier": None},
    {"type": "mcp_tool_selection", "selectedToolNames": ["a", "b"]},
    {"type": "label"},
    {"type": ["odd"]},
    {"summary": "no type at all"},
]
bodies = st.sampled_from(MESSAGES * 3 + OTHERS)
rarely = st.sampled_from([False] * 7 + [True])  # unbiased: integers() favour their bounds


@st.composite
def forests(draw: st.DrawFn) -> list[Entry]:
    """Mostly one chain (so paths are long enough to mix entry kinds), with now and then
    a reused id, a parent elsewhere in the forest, a dangling or unhashable parent; a
    compaction mostly keeps from one of the few entries before it."""
    entries: list[Entry] = []
    for i in range(draw(st.integers(0, 30))):
        odd = draw(rarely)
        entry_id = draw(ids) if odd else IDS[i % len(IDS)]
        chained = entries[-1]["id"] if entries else None
        parent = draw(parents) if draw(rarely) else chained
        body = dict(draw(bodies))
        if body.get("type") == "compaction" and entries and not draw(rarely):
            body["firstKeptEntryId"] = draw(st.sampled_from([e["id"] for e in entries[-2:]]))
        entries.append({"id": entry_id, "parentId": parent, "timestamp": T, **body})
    return entries


@settings(max_examples=500, deadline=None)
@given(entries=forests(), leaf=st.one_of(st.just(UNSET), st.none(), ids, st.just("missing")))
def test_context_and_sources_match_the_reference(entries: list[Entry], leaf: Any) -> None:
    expected, expected_sources = reference_context(entries, None if leaf is None else leaf)
    context = build_session_context(entries, leaf)
    assert context == expected
    assert list(context["models"].items()) == list(expected["models"].items())  # JSON order
    assert [id(e) for e in context_sources(entries, leaf)] == [id(e) for e in expected_sources]


@settings(max_examples=300, deadline=None)
@given(entries=forests(), leaf=ids)
def test_path_to_root_matches_the_reference(entries: list[Entry], leaf: str) -> None:
    by_id = {e["id"]: e for e in entries}
    assert [id(e) for e in path_to_root(leaf, by_id)] == [
        id(e) for e in reference_path(leaf, by_id)
    ]


def test_a_long_cycle_still_ends_and_keeps_every_entry_once() -> None:
    ring = [
        {
            "type": "message",
            "id": f"{i}",
            "parentId": f"{(i - 1) % 1000}",
            "message": {"role": "user", "content": str(i)},
        }
        for i in range(1000)
    ]
    by_id = {e["id"]: e for e in ring}
    path = path_to_root("999", by_id)
    assert [e["id"] for e in path] == [str(i) for i in range(1000)]
    assert len(build_session_context(ring)["messages"]) == 1000


def test_the_default_model_is_the_latest_of_assistants_and_changes_in_key_order() -> None:
    def chain(*bodies: Entry) -> list[Entry]:
        return [
            {"id": f"{i}", "parentId": f"{i - 1}" if i else None, "timestamp": T, **b}
            for i, b in enumerate(bodies)
        ]

    said = {"type": "message", "message": {"role": "assistant", "provider": "a", "model": "1"}}
    user = {"type": "message", "message": {"role": "user", "content": "u"}}
    cases = [
        chain(
            said,
            {"type": "model_change", "model": "x/2"},
            {"type": "model_change", "model": "s/3", "role": "smol"},
            user,
        ),
        chain({"type": "model_change", "model": "s/3", "role": "smol"}, said, user),
        chain(said, {"type": "model_change", "model": "s/3", "role": "smol"}, said, user),
        chain({"type": "model_change", "model": "x/2"}, said, {"type": "model_change"}),
    ]
    for entries in cases:
        context = build_session_context(entries)
        expected, _ = reference_context(entries, UNSET)
        assert list(context["models"].items()) == list(expected["models"].items())
