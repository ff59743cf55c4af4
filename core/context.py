"""Rebuild what the model sees at a leaf: ``build_session_context`` (spec section 9).

The walk is iterative and remembers visited ids, so a corrupt file with a parent cycle
terminates, and a 100,000-deep chain never meets Python's recursion limit. Cost is
O(path length) once ``by_id`` exists.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from core.paths import iso_to_ms

__all__ = [
    "UNSET",
    "Unset",
    "build_session_context",
    "context_sources",
    "empty_context",
    "openai_remote_payload",
    "path_to_root",
]


class Unset:
    __slots__ = ()

    def __repr__(self) -> str:
        return "UNSET"


#: "no leaf given": use the last entry (``None`` means "before the first entry").
UNSET: Final = Unset()

Entry = dict[str, Any]


def empty_context() -> dict[str, Any]:
    return {
        "messages": [],
        "thinkingLevel": "off",
        "models": {},
        "injectedTtsrRules": [],
        "mode": "none",
        "modeData": None,
        # Spec section 13: what the newer agents add to the context.
        "serviceTier": None,
        "activeContextName": None,
        "activeContextTenant": None,
        "selectedMCPToolNames": [],
        "hasPersistedMCPToolSelection": False,
    }


def path_to_root(leaf_id: str | None, by_id: Mapping[str, Entry]) -> list[Entry]:
    """Entries from the root down to ``leaf_id``; stops at a revisited id (cycles)."""
    path: list[Entry] = []
    seen: set[str] = set()
    current = by_id.get(leaf_id) if isinstance(leaf_id, str) else None
    while current is not None:
        entry_id = current.get("id")
        if not isinstance(entry_id, str) or entry_id in seen:
            break
        seen.add(entry_id)
        path.append(current)
        parent_id = current.get("parentId")
        current = by_id.get(parent_id) if isinstance(parent_id, str) else None
    path.reverse()
    return path


def _entry_ms(entry: Entry) -> int | None:
    return iso_to_ms(entry.get("timestamp"))


def _message_of(entry: Entry) -> dict[str, Any] | None:
    """The model-visible message an entry contributes, or ``None``."""
    kind = entry.get("type")
    if kind == "message":
        message = entry.get("message")
        return message if isinstance(message, dict) else None
    if kind == "custom_message":
        return {
            "role": "custom",
            "customType": entry.get("customType"),
            "content": entry.get("content"),
            "display": entry.get("display"),
            "details": entry.get("details"),
            "attribution": entry.get("attribution"),
            "timestamp": _entry_ms(entry),
        }
    if kind == "branch_summary" and entry.get("summary"):
        return {
            "role": "branchSummary",
            "summary": entry["summary"],
            "fromId": entry.get("fromId"),
            "timestamp": _entry_ms(entry),
        }
    return None


def openai_remote_payload(compaction: Entry) -> dict[str, Any] | None:
    """The provider history an OpenAI remote compaction carries, as the agents hand it
    to the model: only with a non-empty string `provider` and a list
    `replacementHistory` under `preserveData.openaiRemoteCompaction`."""
    preserve = compaction.get("preserveData")
    remote = preserve.get("openaiRemoteCompaction") if isinstance(preserve, dict) else None
    if not isinstance(remote, dict):
        return None
    provider, history = remote.get("provider"), remote.get("replacementHistory")
    if not isinstance(provider, str) or not provider or not isinstance(history, list):
        return None
    return {"type": "openaiResponsesHistory", "provider": provider, "items": history}


def _compaction_message(entry: Entry) -> dict[str, Any]:
    message: dict[str, Any] = {
        "role": "compactionSummary",
        "summary": entry.get("summary", ""),
        "shortSummary": entry.get("shortSummary"),
        "tokensBefore": entry.get("tokensBefore"),
        "timestamp": _entry_ms(entry),
    }
    payload = openai_remote_payload(entry)
    if payload is not None:
        message["providerPayload"] = payload
    return message


def _model_of_change(entry: Entry) -> str | None:
    model = entry.get("model")
    if isinstance(model, str):
        return model
    # v1 files wrote model changes as separate provider / modelId fields.
    provider, model_id = entry.get("provider"), entry.get("modelId")
    if isinstance(provider, str) and isinstance(model_id, str):
        return f"{provider}/{model_id}"
    return None


def _service_tier(entry: Entry, context: dict[str, Any]) -> None:
    context["serviceTier"] = entry.get("serviceTier")  # null clears


def _platform_context(entry: Entry, context: dict[str, Any]) -> None:
    context["activeContextName"] = entry.get("contextName")
    context["activeContextTenant"] = entry.get("tenant")


def _mcp_selection(entry: Entry, context: dict[str, Any]) -> None:
    names = entry.get("selectedToolNames")
    context["selectedMCPToolNames"] = (
        [n for n in names if isinstance(n, str)] if isinstance(names, list) else []
    )
    context["hasPersistedMCPToolSelection"] = True


#: State entries of the newer agents (spec section 13) -> how each sets the context.
_NEWER_STATE: Final = {
    "service_tier_change": _service_tier,
    "context_change": _platform_context,
    "mcp_tool_selection": _mcp_selection,
}


def _collect_state(path: Sequence[Entry], context: dict[str, Any]) -> int | None:
    """Fill the state fields; return the index of the latest compaction on the path."""
    models: dict[str, str] = context["models"]
    rules: dict[str, None] = {}
    compaction_index: int | None = None
    for index, entry in enumerate(path):
        kind = entry.get("type")
        if kind == "thinking_level_change":
            level = entry.get("thinkingLevel")
            context["thinkingLevel"] = level if level is not None else "off"
        elif kind == "model_change":
            model = _model_of_change(entry)
            if model is not None:
                role = entry.get("role")
                models[role if isinstance(role, str) else "default"] = model
        elif kind == "message":
            message = entry.get("message")
            if isinstance(message, dict) and message.get("role") == "assistant":
                provider, model_name = message.get("provider"), message.get("model")
                if provider is not None and model_name is not None:
                    models["default"] = f"{provider}/{model_name}"
        elif kind == "ttsr_injection":
            injected = entry.get("injectedRules")
            if isinstance(injected, list):
                for rule in injected:
                    if isinstance(rule, str):
                        rules.setdefault(rule, None)
        elif kind == "mode_change":
            context["mode"] = entry.get("mode", "none")
            context["modeData"] = entry.get("data")
        elif kind in _NEWER_STATE:
            _NEWER_STATE[kind](entry, context)
        elif kind == "compaction":
            compaction_index = index
    context["injectedTtsrRules"] = list(rules)
    return compaction_index


def _message_pairs(
    path: Sequence[Entry], compaction_index: int | None
) -> list[tuple[Entry, dict[str, Any]]]:
    """Each context message with the path entry it comes from, in context order: the
    latest compaction's summary first, then the kept tail and what follows it."""
    if compaction_index is None:
        visible: Sequence[Entry] = path
        pairs: list[tuple[Entry, dict[str, Any]]] = []
    else:
        compaction = path[compaction_index]
        first_kept = compaction.get("firstKeptEntryId")
        kept_start = next(
            (i for i in range(compaction_index) if path[i].get("id") == first_kept),
            compaction_index,  # not on the path: keep nothing from before the compaction
        )
        if openai_remote_payload(compaction) is not None:
            kept_start = compaction_index  # the provider's history replaces the kept tail
        visible = [*path[kept_start:compaction_index], *path[compaction_index + 1 :]]
        pairs = [(compaction, _compaction_message(compaction))]
    for entry in visible:
        message = _message_of(entry)
        if message is not None:
            pairs.append((entry, message))
    return pairs


def _leaf_path(
    entries: Sequence[Entry], leaf_id: str | Unset | None, by_id: Mapping[str, Entry] | None
) -> list[Entry]:
    """Root->leaf path for section 9 step 1-2 (empty for a ``None`` leaf or no entries)."""
    if leaf_id is None or not entries:
        return []
    if by_id is None:
        by_id = {e["id"]: e for e in entries if isinstance(e.get("id"), str)}
    leaf = by_id.get(leaf_id) if isinstance(leaf_id, str) else None
    if leaf is None:
        leaf = entries[-1]
    leaf_key = leaf.get("id")
    path = path_to_root(leaf_key, by_id) if isinstance(leaf_key, str) else [leaf]
    return path or [leaf]


def build_session_context(
    entries: Sequence[Entry],
    leaf_id: str | Unset | None = UNSET,
    by_id: Mapping[str, Entry] | None = None,
) -> dict[str, Any]:
    """``{messages, thinkingLevel, models, injectedTtsrRules, mode, modeData}`` at a leaf,
    plus the newer agents' ``serviceTier``, ``activeContextName``,
    ``activeContextTenant``, ``selectedMCPToolNames``, ``hasPersistedMCPToolSelection``.

    ``entries`` are the session's entries without the header, in file order.
    """
    context = empty_context()
    path = _leaf_path(entries, leaf_id, by_id)
    if path:
        compaction_index = _collect_state(path, context)
        context["messages"] = [message for _, message in _message_pairs(path, compaction_index)]
    return context


def context_sources(
    entries: Sequence[Entry],
    leaf_id: str | Unset | None = UNSET,
    by_id: Mapping[str, Entry] | None = None,
) -> list[Entry]:
    """The entry behind each message of ``build_session_context(...)`` with the same
    arguments, in the same order (a compaction entry stands for its summary)."""
    path = _leaf_path(entries, leaf_id, by_id)
    compaction_index = next(
        (i for i in range(len(path) - 1, -1, -1) if path[i].get("type") == "compaction"), None
    )
    return [entry for entry, _ in _message_pairs(path, compaction_index)]
