"""`sessionfs check`: the command-line face of ``core.check``.

Exit codes: 0 everything checked is clean (after ``--fix``: nothing is left), 1 problems
found (or left after ``--fix``), 2 usage error (missing agent dir or path).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import TextIO

from core.check import CheckTarget, FileReport, Finding, blobs_dir_for, check_targets
from core.check_agents import agent_title
from core.jsonl import dumps_pretty
from core.paths import default_agent_dir, sessions_root

__all__ = ["add_check_parser", "collect_target", "run_check"]

#: Human output shows at most this many findings of one code per file.
MAX_SHOWN_PER_CODE = 20


class UsageError(Exception):
    """A problem with the command line or the paths it names (exit 2)."""


def add_check_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``check`` on a ``sessionfs`` sub-command parser."""
    parser = subparsers.add_parser(
        "check",
        help="check session files for damage (and repair what is safe with --fix)",
        description=(
            "Check session files: header, malformed or torn lines, format version, "
            "duplicate ids, orphans and cycles, dangling references, missing blobs and "
            "leftover temp files. Claude Code and Codex files are recognised and checked "
            "by their agent's rules, never repaired. Exit 0 clean, 1 problems, 2 usage "
            "error."
        ),
    )
    parser.add_argument(
        "paths",
        nargs="*",
        metavar="PATH",
        help="session files or directories to check (default: every *.jsonl under "
        "<agent-dir>/sessions)",
    )
    parser.add_argument(
        "--agent-dir",
        metavar="DIR",
        help="agent directory (default: $PI_CODING_AGENT_DIR or ~/.xcsh/agent)",
    )
    parser.add_argument(
        "--fix",
        action="store_true",
        help="repair what is safe: migrate to v3, drop a torn last line, add a missing final "
        "newline, remove stale temp files (files being written are left alone)",
    )
    parser.add_argument("--json", action="store_true", help="machine-readable output on stdout")
    parser.set_defaults(func=run_check)


def _session_files_under(directory: Path) -> list[Path]:
    return [p for p in directory.rglob("*.jsonl") if not p.name.startswith(".") and not p.is_dir()]


def _dirs_under(directory: Path) -> list[Path]:
    return [directory, *(p for p in directory.rglob("*") if p.is_dir())]


def collect_target(paths: Iterable[str], agent_dir: Path) -> CheckTarget:
    """Files and temp-file directories to check; raises ``UsageError`` for a bad path."""
    files: dict[str, Path] = {}
    temp_dirs: dict[str, Path] = {}

    def add_dir(directory: Path) -> None:
        for f in _session_files_under(directory):
            files.setdefault(os.path.abspath(f), f)
        for d in _dirs_under(directory):
            temp_dirs.setdefault(os.path.abspath(d), d)

    given = list(paths)
    if not given:
        root = sessions_root(agent_dir)
        if not root.is_dir():
            raise UsageError(f"no sessions directory at {root} (use --agent-dir DIR)")
        add_dir(root)
    for raw in given:
        path = Path(raw)
        if path.is_dir():
            add_dir(path)
        elif path.exists() or path.is_symlink():
            # A file named explicitly is checked whatever its name; a dangling symlink is
            # reported as unreadable rather than refused.
            files.setdefault(os.path.abspath(path), path)
        else:
            raise UsageError(f"no such file or directory: {raw}")
    return CheckTarget(
        files=tuple(files[k] for k in sorted(files)),
        temp_dirs=tuple(temp_dirs[k] for k in sorted(temp_dirs)),
    )


class _ProgressBar:
    """A one-line bar on stderr, redrawn in place; only used when stderr is a terminal."""

    WIDTH = 30

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.drawn = False

    def __call__(self, done: int, total: int, path: Path) -> None:
        if total < 2:
            return
        filled = self.WIDTH * done // total
        name = path.name if len(path.name) <= 40 else path.name[:39] + "…"
        bar = "#" * filled + "-" * (self.WIDTH - filled)
        # `done` files are finished; the one named is number done + 1.
        self.stream.write(f"\r\x1b[Kchecking [{bar}] {done + 1}/{total} {name}")
        self.stream.flush()
        self.drawn = True

    def clear(self) -> None:
        if self.drawn:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self.drawn = False


def _format_finding(f: Finding) -> str:
    where = f"line {f.line}: " if f.line is not None else ""
    fix = " [fixable]" if f.fixable else ""
    return f"  {f.severity:<7} {f.code:<22} {where}{f.message}{fix}"


def _print_report(report: FileReport, out: TextIO) -> None:
    if report.agent is not None:
        what = f"written by {agent_title(report.agent)}, checked by its rules (never repaired)"
        out.write(f"{report.path}: {what}, {report.entries} lines\n")
    else:
        version = f"v{report.version}" if report.version is not None else "no header"
        out.write(f"{report.path}: {version}, {report.entries} entries\n")
    shown: dict[str, int] = {}
    hidden: dict[str, int] = {}
    for finding in report.findings:
        if shown.get(finding.code, 0) >= MAX_SHOWN_PER_CODE:
            hidden[finding.code] = hidden.get(finding.code, 0) + 1
            continue
        shown[finding.code] = shown.get(finding.code, 0) + 1
        out.write(_format_finding(finding) + "\n")
    for code, count in hidden.items():
        out.write(f"  ... and {count} more {code}\n")
    for action in report.fixed:
        out.write(f"  fixed:   {action}\n")
    for reason in report.refused:
        out.write(f"  refused: {reason}\n")
    if report.remaining is not None:
        if report.remaining:
            out.write(f"  left:    {len(report.remaining)} problem(s) need a human\n")
        else:
            out.write("  now clean\n")


def _summary(reports: list[FileReport], fix: bool) -> dict[str, int]:
    summary = {
        "checked": len(reports),
        "clean": sum(r.clean for r in reports),
        "with_problems": sum(not r.clean for r in reports),
        "findings": sum(len(r.findings) for r in reports),
    }
    if fix:
        summary["fixed"] = sum(len(r.fixed) for r in reports)
        summary["refused"] = sum(len(r.refused) for r in reports)
    return summary


def run_check(args: argparse.Namespace) -> int:
    """Run ``sessionfs check`` for parsed ``args``; returns the exit code."""
    fix, as_json, explicit_agent = bool(args.fix), bool(args.json), args.agent_dir
    agent_dir = Path(explicit_agent) if explicit_agent else default_agent_dir()
    if explicit_agent and not agent_dir.is_dir():
        print(f"sessionfs check: no agent directory at {agent_dir}", file=sys.stderr)
        return 2
    try:
        target = collect_target(args.paths, agent_dir)
    except UsageError as exc:
        print(f"sessionfs check: {exc}", file=sys.stderr)
        return 2

    # Files inside an agent layout use that agent's blobs; others the agent dir in use.
    def blobs_dir_of(path: Path) -> Path | None:
        return blobs_dir_for(path, agent_dir)

    bar = _ProgressBar(sys.stderr) if sys.stderr.isatty() else None
    reports: list[FileReport] = []
    try:
        for report in check_targets(target, fix=fix, blobs_dir_of=blobs_dir_of, progress=bar):
            reports.append(report)
            shown = report.findings or report.fixed or report.refused or report.agent
            if not as_json and shown:
                if bar is not None:
                    bar.clear()
                _print_report(report, sys.stdout)
    finally:
        if bar is not None:
            bar.clear()

    summary = _summary(reports, fix)
    code = 0 if summary["with_problems"] == 0 else 1
    if as_json:
        document = {
            "exit": code,
            "summary": summary,
            "files": [r.to_dict() for r in reports],
        }
        sys.stdout.buffer.write(dumps_pretty(document))
        sys.stdout.flush()
    else:
        line = f"checked {summary['checked']} file(s): {summary['clean']} clean"
        line += f", {summary['with_problems']} with problems"
        if fix:
            line += f", {summary['fixed']} repair(s) done, {summary['refused']} refused"
        print(line)
    return code
