"""Property tests: random operation sequences against a tiny independent model.

The model knows nothing of core: it keeps parent pointers, a leaf, labels and the
payloads it appended, and derives the expected path, children and context itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core import MemorySessionStorage, SessionManager

texts = st.text(alphabet="abc xyz", max_size=6)
picks = st.integers(min_value=0, max_value=1_000)

operations = st.lists(
    st.one_of(
        st.tuples(st.just("message"), st.sampled_from(["user", "assistant"]), texts),
        st.tuples(st.just("custom"), texts),
        st.tuples(st.just("custom_message"), texts),
        st.tuples(st.just("thinking"), st.sampled_from(["low", "high", None])),
        st.tuples(st.just("model"), st.sampled_from(["a/one", "b/two"])),
        st.tuples(st.just("compaction"), texts, st.one_of(st.none(), picks)),
        st.tuples(st.just("branch"), picks),
        st.tuples(st.just("reset")),
        st.tuples(st.just("summary"), st.one_of(st.none(), picks), texts),
        st.tuples(st.just("label"), picks, st.one_of(st.none(), st.just(""), texts)),
        st.tuples(st.just("reload")),
    ),
    max_size=40,
)


@dataclass
class Model:
    """Reference model of a session tree."""

    order: list[str] = field(default_factory=list)
    parent: dict[str, str | None] = field(default_factory=dict)
    kind: dict[str, str] = field(default_factory=dict)
    payload: dict[str, Any] = field(default_factory=dict)
    leaf: str | None = None
    labels: dict[str, str] = field(default_factory=dict)

    def add(self, entry_id: str, kind: str, payload: Any = None) -> None:
        self.order.append(entry_id)
        self.parent[entry_id] = self.leaf
        self.kind[entry_id] = kind
        self.payload[entry_id] = payload
        self.leaf = entry_id

    def pick(self, n: int) -> str:
        return self.order[n % len(self.order)]

    def path(self) -> list[str]:
        out, current = [], self.leaf
        while current is not None:
            out.append(current)
            current = self.parent[current]
        return out[::-1]

    def children(self, entry_id: str) -> set[str]:
        return {e for e in self.order if self.parent[e] == entry_id}

    def expected_context(self) -> tuple[list[tuple[str, str]], str, str | None]:
        path = self.path()
        thinking, model, compaction = "off", None, None
        for index, e in enumerate(path):
            kind, payload = self.kind[e], self.payload[e]
            if kind == "thinking":
                thinking = payload if payload is not None else "off"
            elif kind == "model":
                model = payload
            elif kind == "message" and payload[0] == "assistant":
                model = "prov/mod"
            elif kind == "compaction":
                compaction = index

        def shown(ids: list[str]) -> list[tuple[str, str]]:
            out = []
            for e in ids:
                kind, payload = self.kind[e], self.payload[e]
                if kind == "message":
                    out.append(payload)
                elif kind == "custom_message":
                    out.append(("custom", payload))
                elif kind == "summary" and payload:
                    out.append(("branchSummary", payload))
            return out

        if compaction is None:
            return shown(path), thinking, model
        summary, first_kept = self.payload[path[compaction]]
        before = path[:compaction]
        start = before.index(first_kept) if first_kept in before else compaction
        messages = [("compactionSummary", summary)]
        messages += shown(path[start:compaction]) + shown(path[compaction + 1 :])
        return messages, thinking, model


def projected(message: dict[str, Any]) -> tuple[str, str]:
    role = message["role"]
    if role in ("user", "assistant"):
        return role, message["content"][0]["text"]
    if role == "custom":
        return role, message["content"]
    return role, message["summary"]


def check_agreement(m: SessionManager, model: Model) -> None:
    assert [e["id"] for e in m.get_entries()] == model.order
    assert all(m.get_entry(e)["parentId"] == model.parent[e] for e in model.order)  # type: ignore[index]
    assert m.get_leaf_id() == model.leaf
    assert [e["id"] for e in m.get_branch()] == model.path()
    assert m.get_labels() == model.labels
    messages, thinking, default_model = model.expected_context()
    context = m.build_session_context()
    assert [projected(x) for x in context["messages"]] == messages
    assert context["thinkingLevel"] == thinking
    assert context["models"].get("default") == default_model
    tree_children: dict[str, set[str]] = {}
    stack = list(m.get_tree())
    while stack:
        node = stack.pop()
        tree_children[node["entry"]["id"]] = {c["entry"]["id"] for c in node["children"]}
        assert node["label"] == model.labels.get(node["entry"]["id"])
        stack.extend(node["children"])
    assert tree_children == {e: model.children(e) for e in model.order}


def apply(
    m: SessionManager, model: Model, op: tuple[Any, ...], storage: MemorySessionStorage
) -> SessionManager:
    kind = op[0]
    if kind == "message":
        _, role, text = op
        message: dict[str, Any] = {"role": role, "content": [{"type": "text", "text": text}]}
        if role == "assistant":
            message |= {"provider": "prov", "model": "mod"}
        model.add(m.append_message(message), "message", (role, text))
    elif kind == "custom":
        model.add(m.append_custom_entry("ext", {"t": op[1]}), "custom")
    elif kind == "custom_message":
        model.add(m.append_custom_message_entry("note", op[1], True), "custom_message", op[1])
    elif kind == "thinking":
        model.add(m.append_thinking_level_change(op[1]), "thinking", op[1])
    elif kind == "model":
        model.add(m.append_model_change(op[1]), "model", op[1])
    elif kind == "compaction":
        _, summary, pick = op
        path = model.path()
        first_kept = path[pick % len(path)] if pick is not None and path else None
        entry_id = m.append_compaction(summary, None, first_kept, 10)
        model.add(entry_id, "compaction", (summary, first_kept))
    elif kind == "branch" and model.order:
        target = model.pick(op[1])
        m.branch(target)
        model.leaf = target
    elif kind == "reset":
        m.reset_leaf()
        model.leaf = None
    elif kind == "summary":
        _, pick, text = op
        if pick is not None and not model.order:
            return m
        from_id = model.pick(pick) if pick is not None else None
        model.leaf = from_id
        model.add(m.branch_with_summary(from_id, text), "summary", text)
    elif kind == "label" and model.order:
        _, pick, label = op
        target = model.pick(pick)
        model.add(m.append_label_change(target, label), "label")
        if label:
            model.labels[target] = label
        else:
            model.labels.pop(target, None)
    elif kind == "reload":
        m.close()
        assert m.session_file is not None
        m = SessionManager.open(m.session_file, storage=storage)
        model.leaf = model.order[-1] if model.order else None
    return m


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(operations)
def test_random_operations_agree_with_the_model(ops: list[tuple[Any, ...]]) -> None:
    storage = MemorySessionStorage()
    m = SessionManager.create("/w", "/sessions/w", storage)
    m.ensure_on_disk()
    model = Model()
    for op in ops:
        m = apply(m, model, op, storage)
        check_agreement(m, model)
    m.close()
    m = apply(m, model, ("reload",), storage)
    check_agreement(m, model)


@settings(max_examples=60, deadline=None)
@given(operations)
def test_deferred_sessions_reload_to_the_same_entries(ops: list[tuple[Any, ...]]) -> None:
    """Without ensure_on_disk: whatever is on disk after close is exactly memory, or
    nothing at all when no assistant message was ever appended."""
    storage = MemorySessionStorage()
    m = SessionManager.create("/w", "/sessions/w", storage)
    model = Model()
    for op in ops:
        if op[0] != "reload":
            m = apply(m, model, op, storage)
    m.close()
    path = m.session_file
    assert path is not None
    has_assistant = any(
        model.kind[e] == "message" and model.payload[e][0] == "assistant" for e in model.order
    )
    if not has_assistant:
        assert not storage.exists(path)
        return
    reloaded = SessionManager.open(path, storage=storage, browse=True)
    assert reloaded.get_entries() == m.get_entries()
