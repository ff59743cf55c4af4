"""Size control of the persisted copy, and blob externalisation / resolution (spec section 8).

Only what goes to disk is changed: ``prepare_for_persist`` returns a new object and
never touches the in-memory entry, so the running session keeps full content.

String lengths are measured the way the agents (JavaScript) measure them: in UTF-16
code units. A cut never splits a surrogate pair, so the result is always valid text.
"""

from __future__ import annotations

import base64
import binascii
import logging
from typing import Any, Final

from core.blobs import BlobStore, parse_blob_ref

__all__ = [
    "MAX_PERSIST_CHARS",
    "MIN_IMAGE_BLOB_CHARS",
    "TRUNCATION_NOTICE",
    "blob_refs_in",
    "prepare_for_persist",
    "resolve_blob_refs",
    "truncate_for_persist",
]

log = logging.getLogger(__name__)

MAX_PERSIST_CHARS: Final = 500_000
TRUNCATION_NOTICE: Final = "\n\n[Session persistence truncated large content]"
#: Image data shorter than this (base64 chars) stays inline.
MIN_IMAGE_BLOB_CHARS: Final = 1024
_SIGNATURE_KEYS: Final = frozenset({"thinkingSignature", "thoughtSignature", "textSignature"})
_DROPPED_KEYS: Final = frozenset({"partialJson", "jsonlEvents"})
_DATA_IMAGE_PREFIX: Final = "data:image/"


def _utf16_length(text: str) -> int:
    if len(text) * 2 <= MAX_PERSIST_CHARS:
        return len(text)  # cannot exceed the limit, skip the encode
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def _utf16_prefix(text: str, units: int) -> str:
    """The longest prefix of ``text`` that is at most ``units`` UTF-16 code units."""
    encoded = text.encode("utf-16-le", "surrogatepass")[: units * 2]
    if encoded:
        last = int.from_bytes(encoded[-2:], "little")
        if 0xD800 <= last <= 0xDBFF:  # a high surrogate whose partner was cut off
            encoded = encoded[:-2]
    return encoded.decode("utf-16-le", "surrogatepass")


def truncate_for_persist(text: str) -> str | None:
    """The persisted form of an over-long string, or ``None`` when it fits."""
    if _utf16_length(text) <= MAX_PERSIST_CHARS:
        return None
    keep = MAX_PERSIST_CHARS - len(TRUNCATION_NOTICE)
    return _utf16_prefix(text, keep) + TRUNCATION_NOTICE


def _externalise_image(block: dict[str, Any], blob_store: BlobStore) -> dict[str, Any] | None:
    """A copy of an image block whose base64 data now lives in the blob store."""
    data = block.get("data")
    if not isinstance(data, str) or len(data) < MIN_IMAGE_BLOB_CHARS or parse_blob_ref(data):
        return None
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return None  # not base64 after all: keep it inline rather than lose it
    _, _, ref = blob_store.put(raw)
    copy = dict(block)
    copy["data"] = ref
    return copy


class _PersistTransform:
    """One pass over an entry that builds its persisted copy."""

    def __init__(self, blob_store: BlobStore | None) -> None:
        self.blob_store = blob_store

    def value(self, value: Any, key: str | None) -> Any:
        if isinstance(value, str):
            return self.string(value, key)
        if isinstance(value, dict):
            return self.mapping(value)
        if isinstance(value, list):
            return [self.list_item(item, key) for item in value]
        return value

    def list_item(self, item: Any, key: str | None) -> Any:
        if (
            key == "content"
            and self.blob_store is not None
            and isinstance(item, dict)
            and item.get("type") == "image"
        ):
            externalised = _externalise_image(item, self.blob_store)
            if externalised is not None:
                item = externalised
        return self.value(item, None)

    def string(self, text: str, key: str | None) -> str:
        if (
            key == "image_url"
            and self.blob_store is not None
            and text.startswith(_DATA_IMAGE_PREFIX)
            and ";base64," in text
        ):
            return self.blob_store.put(text.encode("utf-8", "surrogatepass"))[2]
        truncated = truncate_for_persist(text)
        if truncated is None:
            return text
        return "" if key in _SIGNATURE_KEYS else truncated

    def mapping(self, obj: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        content_truncated = False
        for key, item in obj.items():
            if key in _DROPPED_KEYS:
                continue
            new = self.value(item, key)
            if key == "content" and isinstance(item, str) and new is not item:
                content_truncated = True
            out[key] = new
        line_count = out.get("lineCount")
        if (
            content_truncated
            and isinstance(line_count, int | float)
            and not isinstance(line_count, bool)
        ):
            out["lineCount"] = out["content"].count("\n") + 1
        return out


def prepare_for_persist(entry: dict[str, Any], blob_store: BlobStore | None) -> dict[str, Any]:
    """The copy of ``entry`` that goes to disk (``entry`` itself is left untouched)."""
    return _PersistTransform(blob_store).mapping(entry)


def _inline_blob(sha: str, blob_store: BlobStore) -> bytes | None:
    raw = blob_store.get(sha)
    if raw is None:
        log.warning("blob %s is missing from %s; keeping the ref", sha, blob_store.directory)
    return raw


def _resolve_in(value: Any, blob_store: BlobStore) -> int:
    """Replace blob refs below ``value`` in place; return how many blobs were missing."""
    missing = 0
    stack: list[Any] = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            stack.extend(node)
            continue
        if not isinstance(node, dict):
            continue
        image_sha = parse_blob_ref(node.get("data")) if node.get("type") == "image" else None
        if image_sha is not None:
            raw = _inline_blob(image_sha, blob_store)
            if raw is None:
                missing += 1
            else:
                node["data"] = base64.b64encode(raw).decode("ascii")
        url_sha = parse_blob_ref(node.get("image_url"))
        if url_sha is not None:
            raw = _inline_blob(url_sha, blob_store)
            if raw is None:
                missing += 1
            else:
                node["image_url"] = raw.decode("utf-8", "surrogatepass")
        stack.extend(item for item in node.values() if isinstance(item, dict | list))
    return missing


def resolve_blob_refs(entry: dict[str, Any], blob_store: BlobStore | None) -> int:
    """Turn blob refs of a ``message`` / ``custom_message`` entry back into inline data.

    Works in place; a missing blob keeps its ref (with a warning) and never fails the load.
    Returns the number of refs that could not be resolved.
    """
    if blob_store is None:
        return 0
    kind = entry.get("type")
    if kind == "message":
        return _resolve_in(entry.get("message"), blob_store)
    if kind == "custom_message":
        return _resolve_in(entry.get("content"), blob_store)
    return 0


def blob_refs_in(entry: Any) -> list[str]:
    """Every blob hash referenced anywhere in ``entry``, first-seen order, no repeats."""
    found: dict[str, None] = {}
    stack: list[Any] = [entry]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            stack.extend(reversed(list(node.values())))
        elif isinstance(node, list):
            stack.extend(reversed(node))
        else:
            sha = parse_blob_ref(node)
            if sha is not None:
                found.setdefault(sha, None)
    return list(found)
