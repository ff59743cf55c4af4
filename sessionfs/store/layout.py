"""The object key scheme (docs/store.md is the prose version; keep the two in step).

Under the store prefix ``P``::

    P/blobs/<sha256>                                      shared blob bytes
    P/machines/<m>/claims/<epoch>                         who syncs machine <m> (JSON)
    P/machines/<m>/blobs/<sha256>                         empty: <m> has this blob
    P/machines/<m>/sessions/<rel>/g<gen>/<start>          complete lines [start, start+size)

``<rel>`` is the session file's path under the agent's ``sessions/`` (``.jsonl`` kept, so a
file ``x.jsonl`` and its artifacts dir ``x/`` never share keys); ``<gen>`` and ``<start>``
are zero-padded decimals so that key order is numeric order. A segment's key names only
where it starts, never where it ends: two syncs racing on a file both try the *same* key
and the conditional create lets exactly one win.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .url import StoreURL

__all__ = [
    "SegmentKey",
    "StoreLayout",
    "is_blob_name",
    "is_machine_name",
    "is_safe_relpath",
]

GEN_WIDTH = 8
START_WIDTH = 16
_MACHINE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_BLOB = re.compile(r"^[0-9a-f]{64}$")
_GEN = re.compile(rf"^g(\d{{{GEN_WIDTH}}})$")
_START = re.compile(rf"^(\d{{{START_WIDTH}}})$")


def is_machine_name(name: str) -> bool:
    return bool(_MACHINE.match(name))


def is_blob_name(name: str) -> bool:
    return bool(_BLOB.match(name))


def is_safe_relpath(rel: str) -> bool:
    """A relative ``*.jsonl`` path with no empty, ``.`` or ``..`` part (a store is input)."""
    parts = rel.split("/")
    return (
        rel.endswith(".jsonl")
        and all(part not in ("", ".", "..") for part in parts)
        and "\x00" not in rel
    )


@dataclass(frozen=True, order=True)
class SegmentKey:
    rel: str
    generation: int
    start: int


class StoreLayout:
    """Keys of one store (bucket + prefix) and their parsing."""

    def __init__(self, url: StoreURL) -> None:
        self.url = url

    def machines_prefix(self) -> str:
        return self.url.key("machines", "")

    def machine_prefix(self, machine: str) -> str:
        return self.url.key("machines", machine, "")

    def blob(self, sha: str) -> str:
        return self.url.key("blobs", sha)

    def machine_blob(self, machine: str, sha: str) -> str:
        return self.url.key("machines", machine, "blobs", sha)

    def claim(self, machine: str, epoch: int) -> str:
        return self.url.key("machines", machine, "claims", f"{epoch:0{GEN_WIDTH}d}")

    def claims_prefix(self, machine: str) -> str:
        return self.url.key("machines", machine, "claims", "")

    def sessions_prefix(self, machine: str) -> str:
        return self.url.key("machines", machine, "sessions", "")

    def session_prefix(self, machine: str, rel: str) -> str:
        return self.url.key("machines", machine, "sessions", rel, "")

    def segment(self, machine: str, segment: SegmentKey) -> str:
        return self.url.key(
            "machines",
            machine,
            "sessions",
            segment.rel,
            f"g{segment.generation:0{GEN_WIDTH}d}",
            f"{segment.start:0{START_WIDTH}d}",
        )

    def parse_machine_key(self, key: str) -> tuple[str, str] | None:
        """``(machine, rest)`` for a key under ``machines/``, else ``None``."""
        head = self.machines_prefix()
        if not key.startswith(head):
            return None
        machine, _, rest = key[len(head) :].partition("/")
        return (machine, rest) if is_machine_name(machine) and rest else None

    @staticmethod
    def parse_segment(rest: str) -> SegmentKey | None:
        """The segment named by ``sessions/<rel>/g<gen>/<start>``, else ``None``.

        Parsed from the right: the last two parts are always the generation and start,
        so a session path may itself contain anything a file name can.
        """
        if not rest.startswith("sessions/"):
            return None
        rel, _, tail = rest[len("sessions/") :].rpartition("/")
        rel, _, gen_part = rel.rpartition("/")
        gen, start = _GEN.match(gen_part), _START.match(tail)
        if gen is None or start is None or not is_safe_relpath(rel):
            return None
        return SegmentKey(rel=rel, generation=int(gen.group(1)), start=int(start.group(1)))

    @staticmethod
    def parse_claim(rest: str) -> int | None:
        if not rest.startswith("claims/"):
            return None
        epoch = rest[len("claims/") :]
        return int(epoch) if epoch.isdigit() and len(epoch) == GEN_WIDTH else None

    @staticmethod
    def parse_machine_blob(rest: str) -> str | None:
        if not rest.startswith("blobs/"):
            return None
        sha = rest[len("blobs/") :]
        return sha if is_blob_name(sha) else None
