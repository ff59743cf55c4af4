"""fsck for session files: find what is wrong, and repair only what is safe to repair.

A Claude Code or Codex file is recognised and checked by that agent's rules instead
(`core.check_agents`), and never repaired: it belongs to the other agent.

What is checked, per xcsh/pi/omp file: readability; omp 18's title slot (valid, exactly 256
bytes); the header; malformed lines; the format version
(migration pending?); duplicate ids; orphans and parent cycles; ``firstKeptEntryId``,
``targetId`` and ``fromId`` pointing nowhere; blob refs whose blob is missing; a torn
last line; a missing final newline; leftover ``.<name>.<random>.tmp`` files of
interrupted atomic rewrites.

The structural checks run on the *migrated in-memory view* (what the mount and the
agents show), so a v1 file with no ids at all is checked with the same deterministic
ids ``core.migrate`` gives it.

What ``fix`` repairs, and why each is safe:

- migration to v3: the same ``migrate_session_entries`` every load runs, so ids are the
  ones already shown; every parseable entry is written back, malformed lines are kept
  verbatim (the agents skip them too; deleting them would delete data);
- a torn last line: not an entry by definition (half a write), dropped;
- a missing final newline after a complete entry: added, so the next append of an agent
  that does not guard against it is not glued onto that entry;
- stale temp files: removed only when older than ``STALE_TEMP_SECONDS``, because a young
  one may belong to a rewrite that is still running.

A title slot is never changed or dropped by ``fix``: its line is kept byte for byte
like every line fix does not repair (a bad one is reported for a person to decide).

A file is rewritten through the carrying rewrite (``core.rewrite``): the repair is
computed again from the file's bytes at rewrite time, lines an agent appends meanwhile
are carried over, and the rewrite is refused (and reported) when another process holds
the file open for writing (Linux ``/proc``, best effort) or replaced it since the check.
"""

from __future__ import annotations

import copy
import dataclasses
import os
import stat as stat_module
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

from core.blobs import BlobStore, may_contain_blob_refs
from core.check_agents import agent_findings, agent_of
from core.file_identity import FileIdentity
from core.jsonl import JsonlReport, dumps_line, is_header, parse_jsonl_report
from core.migrate import CURRENT_SESSION_VERSION, migrate_session_entries
from core.paths import blobs_dir, layout_of_session_file
from core.persist import blob_refs_in
from core.rewrite import SessionBusyError, SourceReplacedError
from core.storage import FileSessionStorage
from core.title_slot import TITLE_SLOT_BYTES, TITLE_SLOT_TYPE, parse_title_slot

__all__ = [
    "STALE_TEMP_SECONDS",
    "CheckTarget",
    "FileReport",
    "Finding",
    "Severity",
    "TempFile",
    "blobs_dir_for",
    "check_file",
    "check_targets",
    "find_temp_files",
    "fix_file",
    "remove_stale_temp_file",
]

Severity = Literal["error", "warning"]

#: A temp file younger than this may belong to a rewrite in progress: report, never remove.
STALE_TEMP_SECONDS: Final = 10 * 60


@dataclass(frozen=True, slots=True)
class Finding:
    """One problem. ``line`` is 1-based when the problem sits on a line of the file."""

    code: str
    severity: Severity
    message: str
    line: int | None = None
    fixable: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "severity": self.severity,
            "message": self.message,
            "line": self.line,
            "fixable": self.fixable,
        }


@dataclass(slots=True)
class FileReport:
    """Everything found about one file (or one orphaned temp file), and what fix did."""

    path: str
    #: header version as the loader reads it (absent = 1); None when there is no header.
    version: int | None = None
    migration_pending: bool = False
    #: number of entries, header not counted.
    entries: int = 0
    findings: list[Finding] = field(default_factory=list)
    #: what ``fix`` did, one sentence each.
    fixed: list[str] = field(default_factory=list)
    #: what ``fix`` would have done but refused, with the reason.
    refused: list[str] = field(default_factory=list)
    #: findings left after ``fix`` (None when no fix was attempted).
    remaining: list[Finding] | None = None
    #: another agent's file (``"claude"``, ``"codex"``), checked by its rules; None: xcsh
    agent: str | None = None

    @property
    def problems(self) -> list[Finding]:
        """What is still wrong: the remaining findings after a fix, else all findings."""
        return self.findings if self.remaining is None else self.remaining

    @property
    def clean(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "version": self.version,
            "migration_pending": self.migration_pending,
            "entries": self.entries,
            "clean": self.clean,
            "findings": [f.to_dict() for f in self.findings],
            "fixed": list(self.fixed),
            "refused": list(self.refused),
            "remaining": None if self.remaining is None else [f.to_dict() for f in self.remaining],
            "agent": self.agent,
        }


# ---------------------------------------------------------------------------
# Snapshots: "has anyone touched this file since I looked?"
# ---------------------------------------------------------------------------


def _identity(path: Path) -> FileIdentity | None:
    try:
        return FileIdentity.of(os.stat(path))
    except OSError:
        return None


# ---------------------------------------------------------------------------
# Analysis
# ---------------------------------------------------------------------------


@dataclass(slots=True)
class _Analysis:
    """A report plus what fix needs to repair the file without reading it twice."""

    report: FileReport
    data: bytes = b""
    parsed: JsonlReport | None = None
    #: migrated copy of parsed.objects (header first); None without a header.
    migrated: list[dict[str, Any]] | None = None
    snapshot: FileIdentity | None = None
    #: the first line is a ``title`` object (omp 18's title slot, valid or not)
    title_slot: bool = False


def blobs_dir_for(path: str | os.PathLike[str], fallback_agent_dir: Path | None) -> Path | None:
    """The blob store of the agent dir the file lives in (sub-agent files and the XDG
    split included), else of ``fallback_agent_dir``."""
    layout = layout_of_session_file(path)
    if layout is not None:
        return layout.blobs
    return None if fallback_agent_dir is None else blobs_dir(fallback_agent_dir)


def _header_version(header: dict[str, Any]) -> tuple[int, str | None]:
    """The version the migrator will use, and a complaint when the field is odd."""
    if "version" not in header:
        return 1, None
    value = header["version"]
    if isinstance(value, int) and not isinstance(value, bool):
        if value >= 1:
            return value, None
        return value, f"header version {value!r} is below 1; it is read as an old (v1) file"
    return 1, f"header version {value!r} is not an integer; it is read as an old (v1) file"


def _check_header(a: _Analysis) -> bool:
    """Header findings; True when there is a usable header to check entries against."""
    parsed, report = a.parsed, a.report
    assert parsed is not None
    if not parsed.objects:
        if not a.data.strip():
            what = "the file is empty"
        elif a.title_slot:
            what = "nothing follows the title slot"
        else:
            what = "no JSON object in the file"
        report.findings.append(
            Finding(
                "header-missing",
                "error",
                what + ", so no session header; agents would start a new session over this file",
            )
        )
        return False
    first, line = parsed.objects[0], parsed.object_lines[0]
    if first.get("type") != "session":
        report.findings.append(
            Finding(
                "header-missing",
                "error",
                f"the first object is a {first.get('type')!r} entry, not a session header; "
                "agents treat the file as no session and would start a new one over it",
                line,
            )
        )
        return False
    if not is_header(first):
        report.findings.append(
            Finding(
                "header-invalid",
                "error",
                f"the session header has no string id (id = {first.get('id')!r}); agents "
                "treat the file as no session",
                line,
            )
        )
        return False
    version, complaint = _header_version(first)
    if complaint is not None:
        report.findings.append(Finding("header-invalid", "warning", complaint, line))
    report.version = version
    if version > CURRENT_SESSION_VERSION:
        report.findings.append(
            Finding(
                "version-newer",
                "warning",
                f"format v{version} is newer than this tool knows (v{CURRENT_SESSION_VERSION});"
                " checked as if it were v3",
                line,
            )
        )
    return True


def _check_lines(a: _Analysis) -> None:
    parsed, report = a.parsed, a.report
    assert parsed is not None
    for number in parsed.bad_lines:
        report.findings.append(
            Finding(
                "malformed-line",
                "error",
                "not a JSON object; agents skip this line (kept as is: it may still hold data)",
                number,
            )
        )
    last_line = a.data.count(b"\n") + 1
    if parsed.torn_tail:
        tail = len(a.data) - (a.data.rfind(b"\n") + 1)
        report.findings.append(
            Finding(
                "torn-last-line",
                "warning",
                f"the last line ({tail} bytes, no newline) is half a write; fix drops it",
                last_line,
                fixable=True,
            )
        )
    elif a.data and not a.data.endswith(b"\n") and not a.data[a.data.rfind(b"\n") + 1 :].isspace():
        report.findings.append(
            Finding(
                "missing-final-newline",
                "warning",
                "the last entry has no newline; an unguarded append would be glued onto it; "
                "fix adds the newline",
                last_line,
                fixable=True,
            )
        )


def _check_entries(a: _Analysis, blob_store: BlobStore | None) -> None:
    """Structure of the migrated entries: ids, parents, cycles, references, blobs."""
    parsed, report, migrated = a.parsed, a.report, a.migrated
    assert parsed is not None and migrated is not None
    findings = report.findings
    entries = migrated[1:]
    lines = parsed.object_lines[1:]

    # Later duplicates win in the by-id map, like the manager's index.
    by_id: dict[str, dict[str, Any]] = {}
    line_of: dict[str, int] = {}
    first_line: dict[str, int] = {}
    for entry, line in zip(entries, lines, strict=True):
        entry_id = entry.get("id")
        if not isinstance(entry_id, str):
            findings.append(
                Finding("missing-id", "error", f"entry has no string id (id = {entry_id!r})", line)
            )
            continue
        if entry_id in first_line:
            findings.append(
                Finding(
                    "duplicate-id",
                    "error",
                    f"id {entry_id} is already used on line {first_line[entry_id]}",
                    line,
                )
            )
        else:
            first_line[entry_id] = line
        by_id[entry_id] = entry
        line_of[entry_id] = line

    for entry, line in zip(entries, lines, strict=True):
        parent = entry.get("parentId")
        if parent is None or parent == entry.get("id"):
            continue  # a root; a self-parent is reported as a cycle below
        if not isinstance(parent, str):
            findings.append(
                Finding("invalid-parent", "error", f"parentId {parent!r} is not a string", line)
            )
        elif parent not in by_id:
            findings.append(Finding("orphan", "warning", f"parent {parent} does not exist", line))

    for cycle in _cycles(by_id):
        first = min(cycle, key=line_of.__getitem__)
        findings.append(
            Finding(
                "cycle",
                "error",
                "parent links form a cycle: " + " -> ".join(_rotate(cycle, first)),
                line_of[first],
            )
        )

    _check_references(entries, lines, by_id, findings)
    if blob_store is not None and may_contain_blob_refs(a.data):
        _check_blobs(entries, lines, blob_store, findings)


def _cycles(by_id: dict[str, dict[str, Any]]) -> list[list[str]]:
    """Each parent cycle once, in parent-walk order. Iterative: chains may be 10^5 long."""
    done: set[str] = set()
    cycles: list[list[str]] = []
    for start in by_id:
        if start in done:
            continue
        path: list[str] = []
        position: dict[str, int] = {}
        current: str | None = start
        while current is not None and current in by_id and current not in done:
            if current in position:
                cycles.append(path[position[current] :])
                break
            position[current] = len(path)
            path.append(current)
            parent = by_id[current].get("parentId")
            current = parent if isinstance(parent, str) else None
        done.update(path)
    return cycles


def _rotate(cycle: list[str], first: str) -> list[str]:
    i = cycle.index(first)
    rotated = cycle[i:] + cycle[:i]
    return [*rotated, first]


def _check_references(
    entries: list[dict[str, Any]],
    lines: list[int],
    by_id: dict[str, dict[str, Any]],
    findings: list[Finding],
) -> None:
    for entry, line in zip(entries, lines, strict=True):
        kind = entry.get("type")
        if kind == "compaction":
            target = entry.get("firstKeptEntryId")
            if target is not None and target not in by_id:
                findings.append(
                    Finding(
                        "dangling-first-kept",
                        "warning",
                        f"compaction firstKeptEntryId {target!r} does not exist; no entries "
                        "before the compaction are kept in context",
                        line,
                    )
                )
        elif kind == "label":
            target = entry.get("targetId")
            if target not in by_id:
                findings.append(
                    Finding(
                        "dangling-label-target",
                        "warning",
                        f"label targetId {target!r} does not exist",
                        line,
                    )
                )
        elif kind == "branch_summary":
            target = entry.get("fromId")
            if target != "root" and target not in by_id:
                findings.append(
                    Finding(
                        "dangling-from-id",
                        "warning",
                        f"branch_summary fromId {target!r} does not exist",
                        line,
                    )
                )


def _check_blobs(
    entries: list[dict[str, Any]],
    lines: list[int],
    blob_store: BlobStore,
    findings: list[Finding],
) -> None:
    present: dict[str, bool] = {}
    for entry, line in zip(entries, lines, strict=True):
        for sha in blob_refs_in(entry):
            if sha not in present:
                present[sha] = blob_store.has(sha)
            if not present[sha]:
                findings.append(
                    Finding(
                        "missing-blob",
                        "error",
                        f"blob {sha} is not in {blob_store.directory}; the content stays a "
                        "reference",
                        line,
                    )
                )


def _take_title_slot(a: _Analysis) -> None:
    """Take a ``title`` object on line 1 (omp 18's title slot) out of the parsed objects,
    so the header after it is checked as the header; report a slot omp would not read
    or would break on its next rename (it overwrites exactly 256 bytes in place)."""
    parsed = a.parsed
    assert parsed is not None
    if not parsed.objects or parsed.object_lines[0] != 1:
        return
    if parsed.objects[0].get("type") != TITLE_SLOT_TYPE:
        return
    del parsed.objects[0], parsed.object_lines[0]
    a.title_slot = True
    newline = a.data.find(b"\n")
    line = a.data if newline < 0 else a.data[: newline + 1]
    if parse_title_slot(line.rstrip(b"\n")) is None:
        a.report.findings.append(
            Finding(
                "title-slot-invalid",
                "error",
                "the first line is a 'title' object but not a valid title slot (type "
                "'title', v 1, string title/updatedAt/pad); omp reads it as an entry before "
                "the header and treats the file as no session",
                1,
            )
        )
    elif len(line) != TITLE_SLOT_BYTES:
        a.report.findings.append(
            Finding(
                "title-slot-size",
                "error",
                f"the title slot is {len(line)} bytes, not {TITLE_SLOT_BYTES}; omp's next "
                f"rename overwrites exactly {TITLE_SLOT_BYTES} bytes in place and would "
                "damage the line after it (left as is)",
                1,
            )
        )


def _check_other_agent(a: _Analysis) -> bool:
    """Check a Claude Code or Codex file by its agent's rules; False for any other."""
    parsed, report = a.parsed, a.report
    assert parsed is not None
    agent = agent_of(parsed.objects)
    if agent is None:
        return False
    report.agent = agent
    report.entries = len(parsed.objects)
    report.findings[:] = [_never_repaired(f) for f in report.findings]
    for code, severity, message, line in agent_findings(agent, parsed.objects, parsed.object_lines):
        report.findings.append(Finding(code, severity, message, line))
    return True


def _never_repaired(finding: Finding) -> Finding:
    """A line finding of another agent's file: reported, never repaired (the agent may
    be appending to it; sessionfs only reads other agents' files)."""
    if not finding.fixable:
        return finding
    said = finding.message.split("; fix ")[0]
    return dataclasses.replace(
        finding, fixable=False, message=f"{said}; sessionfs never rewrites it"
    )


def _read_structure(a: _Analysis) -> bool:
    """Parse ``a.data``: line findings, title slot, header, migrated view. True with a
    header."""
    a.parsed = parse_jsonl_report(a.data)
    _check_lines(a)
    if _check_other_agent(a):
        return False
    _take_title_slot(a)
    if not _check_header(a):
        return False
    # Deep copy: fix compares migrated entries with the originals to keep unchanged
    # lines byte for byte.
    a.migrated = copy.deepcopy(a.parsed.objects)
    a.report.migration_pending = migrate_session_entries(a.migrated)
    return True


def _analyse(path: Path, blobs_dir: Path | None) -> _Analysis:
    a = _Analysis(FileReport(str(path)))
    try:
        st = os.stat(path)
        if not stat_module.S_ISREG(st.st_mode):
            # Opening a FIFO or a device would block or read forever.
            raise OSError(f"not a regular file: {path}")
        before = FileIdentity.of(st)
        with open(path, "rb") as fh:
            a.data = fh.read()
    except OSError as exc:
        a.report.findings.append(Finding("unreadable", "error", f"cannot read: {exc}"))
        return a
    a.snapshot = before
    if _read_structure(a):
        assert a.parsed is not None
        a.report.entries = len(a.migrated or ()) - 1
        if a.report.migration_pending:
            a.report.findings.append(
                Finding(
                    "migration-pending",
                    "warning",
                    f"format v{a.report.version}, current is v{CURRENT_SESSION_VERSION}; fix "
                    "migrates it (ids stay the ones the mount shows)",
                    a.parsed.object_lines[0],
                    fixable=True,
                )
            )
        _check_entries(a, BlobStore(blobs_dir) if blobs_dir is not None else None)
    # Stat again after the whole analysis: a live writer during it makes it stale.
    after = _identity(path)
    if after != before:
        reason = before.describe_change(after) if after is not None else "it disappeared"
        a.report.findings.append(
            Finding(
                "changed-during-check",
                "warning",
                f"the file changed while it was checked ({reason}); a live process may be "
                "writing it; results may be stale, nothing will be repaired",
            )
        )
    a.report.findings.sort(key=lambda f: f.line or 0)
    return a


def check_file(path: str | os.PathLike[str], *, blobs_dir: Path | None = None) -> FileReport:
    """Check one session file (read only). ``blobs_dir`` None = no blob check."""
    return _analyse(Path(path), blobs_dir).report


# ---------------------------------------------------------------------------
# Repair
# ---------------------------------------------------------------------------


def _repaired_bytes(a: _Analysis) -> tuple[bytes, list[str]]:
    """The file's new content and what changed; migrated lines are re-serialised,
    every other line (including malformed ones) is kept byte for byte."""
    parsed, data = a.parsed, a.data
    assert parsed is not None
    done: list[str] = []
    codes = {f.code for f in a.report.findings}
    lines = data.split(b"\n")
    # The last element is what follows the final newline ("" when the file ends in one).
    tail = lines.pop()
    replacement: dict[int, bytes] = {}
    if a.report.migration_pending and a.migrated is not None:
        changed = 0
        for original, migrated, number in zip(
            parsed.objects, a.migrated, parsed.object_lines, strict=True
        ):
            if original != migrated:
                replacement[number] = dumps_line(migrated)[:-1]
                changed += 1
        done.append(
            f"migrated v{a.report.version} -> v{CURRENT_SESSION_VERSION} "
            f"({changed} of {len(parsed.objects)} lines rewritten, every entry kept)"
        )
    content = b"".join(replacement.get(n, raw) + b"\n" for n, raw in enumerate(lines, start=1))
    if tail.isspace():
        content += tail  # whitespace after the final newline: the loader ignores it, keep it
    elif tail and "torn-last-line" in codes:
        done.append(f"dropped the torn last line {len(lines) + 1} ({len(tail)} bytes)")
    elif tail:
        # A complete entry without its newline (otherwise the tail would be torn).
        content += replacement.get(len(lines) + 1, tail) + b"\n"
        done.append(f"added the missing newline after line {len(lines) + 1}")
    return content, done


def fix_file(path: str | os.PathLike[str], *, blobs_dir: Path | None = None) -> FileReport:
    """Check ``path`` and repair what is safe (see the module doc); the report says what
    was found, what was done, what was refused and what is left."""
    path = Path(path)
    a = _analyse(path, blobs_dir)
    report = a.report
    fixable = [f for f in report.findings if f.fixable]
    if fixable:
        _rewrite_if_safe(path, a)
    report.remaining = check_file(path, blobs_dir=blobs_dir).findings
    return report


def _rewrite_if_safe(path: Path, a: _Analysis) -> None:
    report = a.report
    what = ", ".join(sorted({f.code for f in report.findings if f.fixable}))
    if a.snapshot is None:
        report.refused.append(f"{what}: the file could not be read; not rewritten")
        return
    target = Path(os.path.realpath(path))  # rewrite a symlink's target, keep the link
    done: list[str] = []
    tail_completed = False

    def repair(current: bytes) -> bytes:
        # Computed from the bytes at rewrite time: lines appended since the check are
        # part of them (and kept as they are).
        nonlocal tail_completed
        tail_completed = len(current) > a.data.rfind(b"\n") + 1
        fresh = _Analysis(FileReport(str(path)), data=current)
        _read_structure(fresh)
        content, done[:] = _repaired_bytes(fresh)
        return content

    try:
        FileSessionStorage().rewrite(target, repair, expected_inode=a.snapshot.ino)
    except SessionBusyError as exc:
        report.refused.append(
            f"{what}: open for writing by pid {', '.join(map(str, exc.pids))}; not rewritten"
        )
        return
    except SourceReplacedError:
        report.refused.append(f"{what}: it was replaced by another file since it was checked")
        return
    except OSError as exc:
        report.refused.append(f"{what}: rewrite failed ({exc}); the file is untouched")
        return
    report.fixed.extend([*done, *_tail_repairs(a, tail_completed)])


def _tail_repairs(a: _Analysis, completed: bool) -> list[str]:
    """What the rewrite did to the file's last line (it keeps whole lines only).
    ``completed``: the last line had become whole by the time of the rewrite."""
    codes = {f.code for f in a.report.findings}
    lines = a.data.count(b"\n")
    tail = len(a.data) - (a.data.rfind(b"\n") + 1)
    if "torn-last-line" in codes and not completed:
        return [f"dropped the torn last line {lines + 1} ({tail} bytes)"]
    if "missing-final-newline" in codes:
        return [f"added the missing newline after line {lines + 1}"]
    return []


# ---------------------------------------------------------------------------
# Temp files of interrupted atomic rewrites
# ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TempFile:
    """``.<name>.<random>.tmp``: what ``atomic_write`` leaves behind when interrupted."""

    path: Path
    #: the file the rewrite was for (may not exist any more).
    target: Path
    age_seconds: float
    snapshot: FileIdentity

    @property
    def stale(self) -> bool:
        return self.age_seconds >= STALE_TEMP_SECONDS

    def finding(self) -> Finding:
        age = f"{self.age_seconds:.0f}s old"
        if self.stale:
            return Finding(
                "stale-temp-file",
                "warning",
                f"{self.path.name} ({self.snapshot.size} bytes, {age}) is left over from an "
                "interrupted rewrite; fix removes it",
                fixable=True,
            )
        return Finding(
            "temp-file",
            "warning",
            f"{self.path.name} ({age}) may belong to a rewrite in progress; left alone",
        )


def _temp_target(directory: Path, name: str) -> Path | None:
    if not (name.startswith(".") and name.endswith(".tmp")):
        return None
    stem, dot, _random = name[1:-4].rpartition(".")
    return directory / stem if dot and stem else None


def find_temp_files(directory: Path, *, now: float | None = None) -> list[TempFile]:
    """Temp files of atomic rewrites directly in ``directory``, by name."""
    now = time.time() if now is None else now
    found: list[TempFile] = []
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return found
    for name in names:
        target = _temp_target(directory, name)
        if target is None:
            continue
        path = directory / name
        try:
            st = os.lstat(path)
        except OSError:
            continue
        if not stat_module.S_ISREG(st.st_mode):
            continue
        found.append(TempFile(path, target, max(0.0, now - st.st_mtime), FileIdentity.of(st)))
    return found


def remove_stale_temp_file(temp: TempFile) -> str:
    """Remove ``temp`` if it is stale and unchanged; returns what happened (raises
    ``ValueError`` with the reason when it refuses)."""
    if not temp.stale:
        raise ValueError(f"{temp.path.name} is younger than {STALE_TEMP_SECONDS}s; left alone")
    try:
        now = FileIdentity.of(os.lstat(temp.path))
    except FileNotFoundError:
        return f"{temp.path.name} was already gone"
    if now != temp.snapshot:
        raise ValueError(f"{temp.path.name} changed since it was checked; left alone")
    os.unlink(temp.path)
    return f"removed stale temp file {temp.path.name}"


# ---------------------------------------------------------------------------
# Many files
# ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CheckTarget:
    """What to check: session files, and directories whose temp files to look at.

    ``temp_dirs``: every temp file in them is reported. Temp files of a session in
    ``files`` are reported with that session even when its directory is not listed.
    """

    files: tuple[Path, ...]
    temp_dirs: tuple[Path, ...] = ()


def check_targets(
    target: CheckTarget,
    *,
    fix: bool = False,
    blobs_dir_of: Callable[[Path], Path | None] = lambda _p: None,
    progress: Callable[[int, int, Path], None] | None = None,
) -> Iterator[FileReport]:
    """One report per session file (in order), then one per temp file whose session was
    not among them. ``progress(done, total, path)`` is called before each file."""
    temps = _collect_temps(target)
    total = len(target.files)
    for index, path in enumerate(target.files):
        if progress is not None:
            progress(index, total, path)
        blobs = blobs_dir_of(path)
        report = fix_file(path, blobs_dir=blobs) if fix else check_file(path, blobs_dir=blobs)
        _attach_temps(report, temps.pop(_key(path), []), fix)
        yield report
    for group in temps.values():
        for temp in group:
            report = FileReport(str(temp.path))
            _attach_temps(report, [temp], fix)
            yield report


def _key(path: Path) -> str:
    return os.path.abspath(path)


def _collect_temps(target: CheckTarget) -> dict[str, list[TempFile]]:
    wanted = {_key(p) for p in target.files}
    by_target: dict[str, list[TempFile]] = {}
    seen: set[str] = set()
    listed = {_key(d) for d in target.temp_dirs}
    directories: Iterable[Path] = [
        *target.temp_dirs,
        *{p.parent for p in target.files if _key(p.parent) not in listed},
    ]
    for directory in directories:
        whole_dir = _key(directory) in listed
        for temp in find_temp_files(directory):
            key = _key(temp.path)
            owner = _key(temp.target)
            if key in seen or not (whole_dir or owner in wanted):
                continue
            seen.add(key)
            by_target.setdefault(owner, []).append(temp)
    return by_target


def _attach_temps(report: FileReport, temps: list[TempFile], fix: bool) -> None:
    if not temps:
        return
    report.findings.extend(t.finding() for t in temps)
    left: list[Finding] = []
    for temp in temps:
        if not fix:
            continue
        if not temp.stale:
            left.append(temp.finding())
            continue
        try:
            report.fixed.append(remove_stale_temp_file(temp))
        except (ValueError, OSError) as exc:
            report.refused.append(str(exc))
            left.append(temp.finding())
    if fix:
        report.remaining = [*(report.remaining or []), *left]
