"""Rebuild what the model sees at a leaf: ``build_session_context`` (spec section 9).

The walk is iterative and remembers visited ids, so a corrupt file with a parent cycle
terminates, and a 100,000-deep chain never meets Python's recursion limit. Cost is
O(path length) once ``by_id`` exists.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Mapping, Sequence
from itertools import repeat
from typing import Any, Final

from core.context_notes import CONTEXT_NOTES_TYPE, latest_context_notes, render_context_notes
from core.paths import iso_to_ms

__all__ = [
    "UNSET",
    "Unset",
    "build_session_context",
    "context_sources",
    "empty_context",
    "messages_with_sources",
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
    """Entries from the root down to ``leaf_id``; stops at a revisited id (cycles).

    ``by_id`` maps each entry's id to that entry, as every index of entries here does."""
    path = _walk_up(leaf_id, by_id)
    path.reverse()
    return path


def _walk_up(leaf_id: str | None, by_id: Mapping[str, Entry]) -> list[Entry]:
    """``path_to_root`` leaf first. The common case skips the set of seen ids: a walk
    that meets an entry twice never ends, so one that ends within ``len(by_id)`` steps
    met every entry once. Only a longer walk (a parent cycle) or a parentId that cannot
    be a key pays for the checked walk.

    Subscripts and a KeyError at the root (a ``None`` or unknown parentId, or none at
    all) instead of ``.get`` calls: this loop is most of the cost of a context."""
    current = by_id.get(leaf_id) if isinstance(leaf_id, str) else None
    if current is None:
        return []
    path = [current]
    append = path.append
    try:
        for _ in repeat(None, len(by_id)):
            current = by_id[current["parentId"]]
            append(current)
    except KeyError:  # the root's parent is not an entry: the walk is done
        return path
    except TypeError:  # an unhashable parentId (a damaged file)
        pass
    return _walk_up_checked(leaf_id, by_id)


def _walk_up_checked(leaf_id: str | None, by_id: Mapping[str, Entry]) -> list[Entry]:
    """Leaf first, stopping at a revisited or non-string id or parentId."""
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
    # omp 18's display metadata: how the compaction was made and what it left.
    for key in ("tokensAfter", "method", "warning"):
        if key in entry:
            message[key] = entry[key]
    payload = openai_remote_payload(entry)
    if payload is not None:
        message["providerPayload"] = payload
    return message


def _notes_message(text: str, entry: Entry) -> dict[str, Any]:
    """omp 18's context notes as the hidden custom message put first in the context."""
    return {
        "role": "custom",
        "customType": CONTEXT_NOTES_TYPE,
        "content": render_context_notes(text),
        "display": False,
        "details": None,
        "attribution": None,
        "timestamp": _entry_ms(entry),
    }


def _model_of_change(entry: Entry) -> str | None:
    model = entry.get("model")
    if isinstance(model, str):
        return model
    # v1 files wrote model changes as separate provider / modelId fields.
    provider, model_id = entry.get("provider"), entry.get("modelId")
    if isinstance(provider, str) and isinstance(model_id, str):
        return f"{provider}/{model_id}"
    return None


def _apply_model_change(entry: Entry, models: dict[str, str]) -> None:
    model = _model_of_change(entry)
    if model is not None:
        role = entry.get("role")
        models[role if isinstance(role, str) else "default"] = model


def _assistant_model(message: dict[str, Any]) -> str:
    return f"{message.get('provider')}/{message.get('model')}"


Rules = dict[str, None]  # the injected TTSR rules seen so far, in first-seen order


def _thinking_level(entry: Entry, context: dict[str, Any], rules: Rules) -> None:
    level = entry.get("thinkingLevel")
    context["thinkingLevel"] = level if level is not None else "off"


def _ttsr_injection(entry: Entry, context: dict[str, Any], rules: Rules) -> None:
    injected = entry.get("injectedRules")
    if isinstance(injected, list):
        for rule in injected:
            if isinstance(rule, str):
                rules.setdefault(rule, None)


def _mode(entry: Entry, context: dict[str, Any], rules: Rules) -> None:
    context["mode"] = entry.get("mode", "none")
    context["modeData"] = entry.get("data")


def _service_tier(entry: Entry, context: dict[str, Any], rules: Rules) -> None:
    context["serviceTier"] = entry.get("serviceTier")  # null clears


def _platform_context(entry: Entry, context: dict[str, Any], rules: Rules) -> None:
    context["activeContextName"] = entry.get("contextName")
    context["activeContextTenant"] = entry.get("tenant")


def _mcp_selection(entry: Entry, context: dict[str, Any], rules: Rules) -> None:
    names = entry.get("selectedToolNames")
    context["selectedMCPToolNames"] = (
        [n for n in names if isinstance(n, str)] if isinstance(names, list) else []
    )
    context["hasPersistedMCPToolSelection"] = True


#: State entries other than model changes -> how each sets the context (the last ones
#: are the newer agents', spec section 13).
_STATE_SETTERS: Final = {
    "thinking_level_change": _thinking_level,
    "ttsr_injection": _ttsr_injection,
    "mode_change": _mode,
    "service_tier_change": _service_tier,
    "context_change": _platform_context,
    "mcp_tool_selection": _mcp_selection,
}


def _kept_start(path: Sequence[Entry], compaction_index: int) -> int:
    """Where the kept tail before the compaction at ``compaction_index`` starts: its
    ``firstKeptEntryId`` (ids on a path are distinct, so searching back from the
    compaction finds the same entry as from the root), else the compaction itself."""
    compaction = path[compaction_index]
    if openai_remote_payload(compaction) is not None:
        # The provider's history replaces the kept tail, up to the entry it replays
        # through (omp 18's `providerReplayThroughEntryId`): later entries replay as usual.
        return _index_before(path, compaction_index, compaction.get("providerReplayThroughEntryId"))
    first_kept = compaction.get("firstKeptEntryId")
    for index in range(compaction_index - 1, -1, -1):
        if path[index].get("id") == first_kept:
            return index
    return compaction_index  # not on the path: keep nothing from before the compaction


def _index_before(path: Sequence[Entry], compaction_index: int, through: Any) -> int:
    """Just after the entry ``through`` on the path before the compaction, else the
    compaction itself."""
    if isinstance(through, str):
        for index in range(compaction_index - 1, -1, -1):
            if path[index].get("id") == through:
                return index + 1
    return compaction_index


def _is_user_request(entry: Entry) -> bool:
    message = entry.get("message") if entry.get("type") == "message" else None
    return isinstance(message, dict) and message.get("role") == "user"


def _rollover_request(path: Sequence[Entry], compaction_index: int, reset: int) -> int | None:
    """omp 18's notes-backed rollover (``details.kind`` "experimental-context-rollover")
    summarises nothing before its kept tail: the latest user request before the
    compaction (after a ``/clear``) is recovered verbatim when it is not in that tail."""
    compaction = path[compaction_index]
    details = compaction.get("details")
    if not isinstance(details, dict) or details.get("kind") != "experimental-context-rollover":
        return None
    first_kept = compaction.get("firstKeptEntryId")
    kept_at = next((i for i, e in enumerate(path) if e.get("id") == first_kept), -1)
    for index in range(compaction_index - 1, reset, -1):
        if _is_user_request(path[index]):
            return index if index < kept_at else None
    return None


def _latest_assistant(path: Sequence[Entry], start: int, stop: int) -> dict[str, Any] | None:
    """The last assistant message in ``path[start:stop]`` that names its model."""
    for index in range(stop - 1, start - 1, -1):
        entry = path[index]
        if entry.get("type") != "message":
            continue
        message = entry.get("message")
        if (
            isinstance(message, dict)
            and message.get("role") == "assistant"
            and message.get("provider") is not None
            and message.get("model") is not None
        ):
            return message
    return None


def _gather(
    walked: _Walked, context: dict[str, Any], sources: list[Entry] | None = None
) -> list[dict[str, Any]]:
    """Set the state fields of ``context`` and return the context messages at the end
    of the walked path (the latest compaction's summary first, then its kept tail and
    what follows it). With ``sources``, the entry behind each message is appended to it.

    Messages are shared with the entries, not copied, as the agents do. Only the few
    entries that are not of type "message" go through Python-level dispatch; the
    messages between two of them are taken as slices (see ``_add_messages``)."""
    path, held, others = walked
    last_compaction, last_reset = _apply_state(path, others, context)
    messages: list[dict[str, Any]] = []
    start = 0
    if last_reset is not None and (last_compaction is None or last_reset > last_compaction):
        # omp 18's `/clear`: the context starts after the latest boundary on the path
        # (a compaction after it wins instead).
        start = last_reset + 1
    elif last_compaction is not None:
        compaction = path[last_compaction]
        messages.append(_compaction_message(compaction))
        if sources is not None:
            sources.append(compaction)
        recovered = _rollover_request(
            path, last_compaction, -1 if last_reset is None else last_reset
        )
        if recovered is not None:
            _add_messages(path, held, others, range(recovered, recovered + 1), messages, sources)
        kept = _kept_start(path, last_compaction)
        _add_messages(path, held, others, range(kept, last_compaction), messages, sources)
        start = last_compaction + 1
    _add_messages(path, held, others, range(start, len(path)), messages, sources)
    notes = latest_context_notes([path[index] for index in others])
    if notes is not None and notes[0]:
        messages.insert(0, _notes_message(*notes))
        if sources is not None:
            sources.insert(0, notes[1])
    return messages


#: A root->leaf path, per entry its message (``None`` unless of type "message"), and
#: the indexes of the entries not of type "message".
_Walked = tuple[list[Entry], list[Any], list[int]]


def _held_messages(path: list[Entry]) -> _Walked:
    """``path`` with what `_walk_up_holding` notes of it, for a path walked otherwise.
    Subscripts are cheaper than ``.get``; an entry without a type or a "message" entry
    without one (a damaged file) takes the slower comprehension."""
    others: list[int] = []
    note = others.append
    try:
        held = [e["message"] if e["type"] == "message" else note(i) for i, e in enumerate(path)]
    except KeyError:
        others.clear()
        held = [
            e.get("message") if e.get("type") == "message" else note(i) for i, e in enumerate(path)
        ]
    return path, held, others


def _walk_up_holding(start: Entry, by_id: Mapping[str, Entry]) -> _Walked | None:
    """The path from ``start`` up to the root (reversed to root->leaf at the end), and
    what `_gather` needs of each entry, in the one loop that reads it: a long path does
    not fit in the CPU cache, and a second pass would pay the misses again. ``None``
    where the walk needs care: a parent cycle (more steps than entries), an unhashable
    parentId, an entry without a type or a "message" entry without one; a KeyError
    from the parent lookup is the root (a ``None``, unknown or missing parentId)."""
    path: list[Entry] = []
    held: list[Any] = []
    others: list[int] = []
    add_entry, hold, note = path.append, held.append, others.append
    current = start
    try:
        for _ in repeat(None, len(by_id)):
            add_entry(current)
            if current["type"] == "message":
                hold(current["message"])
            else:
                hold(None)
                note(len(held))  # its index from the leaf, plus one
            current = by_id[current["parentId"]]
    except KeyError:
        if len(held) != len(path):  # the entry just added has no type or message
            return None
    except TypeError:  # an unhashable parentId
        return None
    else:
        return None  # a cycle
    path.reverse()
    held.reverse()
    last = len(path)
    return path, held, [last - index for index in reversed(others)]


def _apply_state(
    path: Sequence[Entry], others: list[int], context: dict[str, Any]
) -> tuple[int | None, int | None]:
    """Set the state fields of ``context`` from the non-message entries at ``others``
    (indexes into ``path``, in order); return the indexes of the last compaction and
    of the last ``reset_boundary``.

    Which assistant message last named the model is looked up backwards, only where a
    model change or the end of the path needs it (the result, key order of ``models``
    included, is the same as setting it at every assistant message)."""
    models: dict[str, str] = context["models"]
    rules: Rules = {}
    setters = _STATE_SETTERS
    last_compaction = last_reset = None
    unscanned = 0  # assistant messages before this index are in `models` already
    for index in others:
        kind = path[index].get("type")
        if kind == "model_change":
            assistant = _latest_assistant(path, unscanned, index)
            if assistant is not None:
                models["default"] = _assistant_model(assistant)
            unscanned = index + 1
            _apply_model_change(path[index], models)
        elif kind == "compaction":
            last_compaction = index
        elif kind == "reset_boundary":
            last_reset = index
        elif isinstance(kind, str) and kind in setters:
            setters[kind](path[index], context, rules)
    assistant = _latest_assistant(path, unscanned, len(path))
    if assistant is not None:
        models["default"] = _assistant_model(assistant)
    context["injectedTtsrRules"] = list(rules)
    return last_compaction, last_reset


def _add_messages(
    path: Sequence[Entry],
    held: list[Any],
    others: list[int],
    span: range,
    messages: list[dict[str, Any]],
    sources: list[Entry] | None,
) -> None:
    """Append the messages of the entries of ``path`` at ``span`` (and those entries
    to ``sources``): each run of "message" entries between two of ``others`` in one
    go, an entry between two runs through ``_message_of``."""
    run_start = span.start
    for index in others[bisect_left(others, span.start) :]:
        if index >= span.stop:
            break
        _add_message_run(path, held, run_start, index, messages, sources)
        made = _message_of(path[index])
        if made is not None:
            messages.append(made)
            if sources is not None:
                sources.append(path[index])
        run_start = index + 1
    _add_message_run(path, held, run_start, span.stop, messages, sources)


def _add_message_run(
    path: Sequence[Entry],
    held: list[Any],
    start: int,
    stop: int,
    messages: list[dict[str, Any]],
    sources: list[Entry] | None,
) -> None:
    """Append ``held[start:stop]``, the messages of "message" entries; one that is not
    a dict (a damaged file) contributes nothing."""
    if start >= stop:
        return
    run = held[start:stop]
    if all(map(isinstance, run, repeat(dict))):
        messages += run
        if sources is not None:
            sources += path[start:stop]
        return
    for entry, message in zip(path[start:stop], run, strict=True):
        if isinstance(message, dict):
            messages.append(message)
            if sources is not None:
                sources.append(entry)


def _walk(
    entries: Sequence[Entry], leaf_id: str | Unset | None, by_id: Mapping[str, Entry] | None
) -> _Walked | None:
    """Section 9 steps 1-2: the root->leaf path and what `_gather` needs of it; ``None``
    for a ``None`` leaf or no entries."""
    if leaf_id is None or not entries:
        return None
    if by_id is None:
        by_id = {e["id"]: e for e in entries if isinstance(e.get("id"), str)}
    leaf = by_id.get(leaf_id) if isinstance(leaf_id, str) else None
    if leaf is None:
        leaf = entries[-1]
    leaf_key = leaf.get("id")
    start = by_id.get(leaf_key) if isinstance(leaf_key, str) else None
    if start is None:
        return _held_messages([leaf])
    walked = _walk_up_holding(start, by_id)
    return walked if walked is not None else _held_messages(path_to_root(leaf_key, by_id))


def build_session_context(
    entries: Sequence[Entry],
    leaf_id: str | Unset | None = UNSET,
    by_id: Mapping[str, Entry] | None = None,
) -> dict[str, Any]:
    """``{messages, thinkingLevel, models, injectedTtsrRules, mode, modeData}`` at a leaf,
    plus the newer agents' ``serviceTier``, ``activeContextName``,
    ``activeContextTenant``, ``selectedMCPToolNames``, ``hasPersistedMCPToolSelection``.

    ``entries`` are the session's entries without the header, in file order. The
    messages are the entries' own message dicts where an entry holds one (shared, as
    the agents share them): copy before changing one.
    """
    context = empty_context()
    walked = _walk(entries, leaf_id, by_id)
    if walked is not None:
        context["messages"] = _gather(walked, context)
    return context


def context_sources(
    entries: Sequence[Entry],
    leaf_id: str | Unset | None = UNSET,
    by_id: Mapping[str, Entry] | None = None,
) -> list[Entry]:
    """The entry behind each message of ``build_session_context(...)`` with the same
    arguments, in the same order (a compaction entry stands for its summary)."""
    return messages_with_sources(entries, leaf_id, by_id)[1]


def messages_with_sources(
    entries: Sequence[Entry],
    leaf_id: str | Unset | None = UNSET,
    by_id: Mapping[str, Entry] | None = None,
) -> tuple[list[dict[str, Any]], list[Entry]]:
    """``build_session_context(...)["messages"]`` and ``context_sources(...)`` from one
    walk of the path (a transcript needs both)."""
    context, sources = context_with_sources(entries, leaf_id, by_id)
    return context["messages"], sources


def context_with_sources(
    entries: Sequence[Entry],
    leaf_id: str | Unset | None = UNSET,
    by_id: Mapping[str, Entry] | None = None,
) -> tuple[dict[str, Any], list[Entry]]:
    """``build_session_context(...)`` and ``context_sources(...)`` from one walk of the
    path (a context written a message at a time needs both)."""
    sources: list[Entry] = []
    context = empty_context()
    walked = _walk(entries, leaf_id, by_id)
    if walked is not None:
        context["messages"] = _gather(walked, context, sources)
    return context, sources
