"""The object key scheme (docs/store.md is the prose version; keep the two in step).

Under the store prefix ``P``::

    P/blobs/<sha256>                                      shared blob bytes
    P/machines/<m>/claims/<epoch>                         who syncs machine <m> (JSON)
    P/machines/<m>/blobs/<sha256>                         empty: <m> has this blob
    P/machines/<m>/sessions/<rel>/g<gen>/<start>          complete lines [start, start+size)
    P/machines/<m>/agents/<agent>/<rel>/g<gen>/<start>    the same, of another agent's file

``<rel>`` is the session file's path under the agent's ``sessions/`` (``.jsonl`` kept, so a
file ``x.jsonl`` and its artifacts dir ``x/`` never share keys), or under another agent's
directory (``projects/<enc>/<id>.jsonl`` of Claude Code's); the part before it is the
file's *tree* (``sessions``, ``agents/claude``); ``<gen>`` and ``<start>``
are zero-padded decimals so that key order is numeric order. A segment's key names only
where it starts, never where it ends: two syncs racing on a file both try the *same* key
and the conditional create lets exactly one win.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .url import AnyStoreURL

__all__ = [
    "MAX_GENERATION",
    "MAX_MACHINES",
    "MAX_START",
    "SESSIONS_TREE",
    "KeyOutOfRange",
    "SegmentKey",
    "StoreLayout",
    "agent_tree",
    "is_blob_name",
    "is_machine_name",
    "is_safe_relpath",
    "split_tree_key",
    "tree_key",
]

GEN_WIDTH = 8
START_WIDTH = 16
#: Machines a reader mirrors and shows at most (in name order): a flood of machine names
#: costs a reader nothing past this.
MAX_MACHINES = 1000
#: The largest generation (and claim epoch) and segment start the fixed widths can hold.
MAX_GENERATION = 10**GEN_WIDTH - 1
MAX_START = 10**START_WIDTH - 1
# ASCII only and matched whole (``fullmatch``): ``\d`` would take "²" and "٣", and ``$``
# a trailing newline. Each parser also rebuilds the key from what it parsed and accepts
# the key only if it comes out the same (docs/store.md, "Strict keys").
_MACHINE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}", re.ASCII)
_BLOB = re.compile(r"[0-9a-f]{64}", re.ASCII)
_GEN = re.compile(rf"g([0-9]{{{GEN_WIDTH}}})", re.ASCII)
_START = re.compile(rf"[0-9]{{{START_WIDTH}}}", re.ASCII)
_EPOCH = re.compile(rf"[0-9]{{{GEN_WIDTH}}}", re.ASCII)
_AGENT = re.compile(r"[a-z][a-z0-9-]{0,31}", re.ASCII)

#: The tree of the agent dir's own sessions (xcsh, omp, pi).
SESSIONS_TREE = "sessions"
_AGENTS = "agents/"


def agent_tree(agent: str) -> str:
    """The tree of another agent's files: ``agents/<agent>`` (``ValueError``: not a name)."""
    if _AGENT.fullmatch(agent) is None:
        raise ValueError(f"{agent!r} is not an agent name the store can hold")
    return _AGENTS + agent


def tree_key(tree: str, rel: str) -> str:
    """One text for a file of any tree (progress and mirror state keys): the agent dir's
    sessions keep their bare ``rel`` (so existing state stays valid), another tree's
    files are ``/<tree>/<rel>`` (no ``rel`` starts with ``/``)."""
    return rel if tree == SESSIONS_TREE else f"/{tree}/{rel}"


def split_tree_key(text: str) -> tuple[str, str]:
    """``(tree, rel)`` of a `tree_key`."""
    if not text.startswith("/"):
        return SESSIONS_TREE, text
    head, agent, rel = text[1:].split("/", 2)
    return f"{head}/{agent}", rel


def _split_tree(rest: str) -> tuple[str, str] | None:
    """``(tree, after)`` of ``sessions/…`` or ``agents/<agent>/…``, else ``None``."""
    if rest.startswith(SESSIONS_TREE + "/"):
        return SESSIONS_TREE, rest[len(SESSIONS_TREE) + 1 :]
    if rest.startswith(_AGENTS):
        agent, _, after = rest[len(_AGENTS) :].partition("/")
        if _AGENT.fullmatch(agent) is not None:
            return _AGENTS + agent, after
    return None


class KeyOutOfRange(ValueError):
    """A number the key format cannot hold in its fixed width."""


def is_machine_name(name: str) -> bool:
    return _MACHINE.fullmatch(name) is not None


def is_blob_name(name: str) -> bool:
    return _BLOB.fullmatch(name) is not None


def _fixed(number: int, width: int, what: str) -> str:
    """``number`` zero-padded to ``width``; :class:`KeyOutOfRange` if it does not fit
    (a wider key would be one that every reader, this one included, rejects)."""
    text = f"{number:0{width}d}"
    if number < 0 or len(text) != width:
        raise KeyOutOfRange(f"{what} {number} does not fit the store's {width}-digit keys")
    return text


#: what an archived file's name ends with: line data, or a Claude sub-agent's meta
#: document (kept as one line)
ARCHIVED_SUFFIXES = (".jsonl", ".meta.json")


def is_safe_relpath(rel: str) -> bool:
    """A relative ``*.jsonl`` (or ``*.meta.json``) path with no empty, ``.`` or ``..``
    part (a store is input)."""
    parts = rel.split("/")
    return (
        rel.endswith(ARCHIVED_SUFFIXES)
        and all(part not in ("", ".", "..") for part in parts)
        and "\x00" not in rel
    )


@dataclass(frozen=True, order=True)
class SegmentKey:
    rel: str
    generation: int
    start: int
    #: ``sessions`` (the agent dir's) or ``agents/<agent>``
    tree: str = SESSIONS_TREE


def _segment_rest(segment: SegmentKey) -> str:
    """The part of a segment's key after ``machines/<m>/``."""
    generation = _fixed(segment.generation, GEN_WIDTH, "generation")
    start = _fixed(segment.start, START_WIDTH, "segment start")
    return f"{segment.tree}/{segment.rel}/g{generation}/{start}"


class StoreLayout:
    """Keys of one store (bucket + prefix) and their parsing."""

    def __init__(self, url: AnyStoreURL) -> None:
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
        return self.url.key("machines", machine, "claims", _fixed(epoch, GEN_WIDTH, "claim epoch"))

    def claims_prefix(self, machine: str) -> str:
        return self.url.key("machines", machine, "claims", "")

    def sessions_prefix(self, machine: str) -> str:
        return self.url.key("machines", machine, "sessions", "")

    def session_prefix(self, machine: str, rel: str, tree: str = SESSIONS_TREE) -> str:
        return self.url.key("machines", machine, tree, rel, "")

    def segment(self, machine: str, segment: SegmentKey) -> str:
        return self.url.key("machines", machine, _segment_rest(segment))

    def parse_machine_key(self, key: str) -> tuple[str, str] | None:
        """``(machine, rest)`` for a key under ``machines/``, else ``None``."""
        head = self.machines_prefix()
        if not key.startswith(head):
            return None
        machine, _, rest = key[len(head) :].partition("/")
        return (machine, rest) if is_machine_name(machine) and rest else None

    @staticmethod
    def parse_segment(rest: str) -> SegmentKey | None:
        """The segment named by ``<tree>/<rel>/g<gen>/<start>`` (tree ``sessions`` or
        ``agents/<agent>``), else ``None``.

        Parsed from the right: the last two parts are always the generation and start,
        so a session path may itself contain anything a file name can. Generation 0 does
        not exist (generations count from 1).
        """
        split = _split_tree(rest)
        if split is None:
            return None
        tree, after = split
        rel, _, tail = after.rpartition("/")
        rel, _, gen_part = rel.rpartition("/")
        gen, start = _GEN.fullmatch(gen_part), _START.fullmatch(tail)
        if gen is None or start is None or not is_safe_relpath(rel):
            return None
        segment = SegmentKey(rel, int(gen.group(1)), int(start.group()), tree)
        return segment if segment.generation > 0 and _segment_rest(segment) == rest else None

    @staticmethod
    def parse_claim(rest: str) -> int | None:
        """The epoch of ``claims/<epoch>`` (8 ASCII digits, from 1), else ``None``."""
        if not rest.startswith("claims/"):
            return None
        text = rest[len("claims/") :]
        if _EPOCH.fullmatch(text) is None:
            return None
        epoch = int(text)
        return epoch if epoch > 0 and f"{epoch:0{GEN_WIDTH}d}" == text else None

    @staticmethod
    def parse_machine_blob(rest: str) -> str | None:
        if not rest.startswith("blobs/"):
            return None
        sha = rest[len("blobs/") :]
        return sha if is_blob_name(sha) else None
