"""A Claude Code directory of the same sessions as a bench corpus (issue 18).

``python -m bench.claude_corpus --sessions 1000 --entries 400 [--out DIR]`` writes
``<corpus>/claude/projects/-work-project-NN/<session id>.jsonl``: every session of the
xcsh corpus (`bench.corpus`, generated first when missing) written the way Claude Code
writes it -- one line per content block of a model response (thinking, text, each
tool_use) sharing a ``message.id``, tool results as ``user`` lines, a compaction as a
``compact_boundary`` and its summary -- so the scale bench can mount 1,000 Claude Code
sessions of the same size beside the agent dir (``bench_scale.py --claude``). Cached
like the corpus: ``claude/stamp.json`` matches the parameters.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import orjson

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import corpus

#: Bump when the converted bytes change.
CONVERTER_VERSION = 2


def _uuid(entry_id: str, n: int = 0) -> str:
    """A uuid-shaped name derived from an xcsh id (deterministic)."""
    return f"{entry_id:0>8}-0000-4000-8000-{n:012d}"


def _blocks(content: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for block in content if isinstance(content, list) else [{"type": "text", "text": content}]:
        kind = block.get("type")
        if kind == "thinking":
            sig = block.get("thinkingSignature", "")
            out.append({"type": "thinking", "thinking": block["thinking"], "signature": sig})
        elif kind == "toolCall":
            out.append(
                {
                    "type": "tool_use",
                    "id": block["id"],
                    "name": block["name"],
                    "input": block["arguments"],
                }
            )
        elif kind == "image":
            out.append(
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="},
                }
            )
        else:
            out.append({"type": "text", "text": block.get("text", "")})
    return out


def session_lines(
    header: dict[str, Any], entries: Iterable[dict[str, Any]]
) -> Iterator[dict[str, Any]]:
    """Claude Code lines for one xcsh session (module docstring; ``entries`` are
    taken one at a time: a session of any size)."""
    sid = header["id"]
    common = {
        "isSidechain": False,
        "userType": "external",
        "cwd": header["cwd"],
        "sessionId": sid,
        "version": "2.0.14",
        "gitBranch": "main",
    }
    last_of: dict[str, str] = {}  # xcsh id -> uuid of its last line

    def chain(entry: dict[str, Any], kind: str, n: int, parent: str | None, **body: Any) -> dict:
        return {
            "parentUuid": parent,
            **common,
            "type": kind,
            **body,
            "uuid": _uuid(entry["id"], n),
            "timestamp": entry["timestamp"],
        }

    for entry in entries:
        parent = last_of.get(entry.get("parentId") or "")
        kind = entry.get("type")
        if kind == "message":
            message = entry["message"]
            role = message["role"]
            if role == "user":
                line = chain(
                    entry,
                    "user",
                    0,
                    parent,
                    message={"role": "user", "content": _blocks(message["content"])},
                )
                yield line
            elif role == "toolResult":
                block = {
                    "type": "tool_result",
                    "tool_use_id": message["toolCallId"],
                    "content": _blocks(message["content"]),
                    "is_error": message["isError"],
                }
                line = chain(
                    entry,
                    "user",
                    0,
                    parent,
                    message={"role": "user", "content": [block]},
                    toolUseResult={"stdout": ""},
                )
                yield line
            else:
                usage = message.get("usage", {})
                tokens = {
                    "input_tokens": usage.get("input", 0),
                    "output_tokens": usage.get("output", 0),
                    "cache_read_input_tokens": usage.get("cacheRead", 0),
                    "cache_creation_input_tokens": usage.get("cacheWrite", 0),
                }
                for n, block in enumerate(_blocks(message["content"])):
                    line = chain(
                        entry,
                        "assistant",
                        n,
                        parent,
                        requestId=f"req_{entry['id']}",
                        message={
                            "id": f"msg_{entry['id']}",
                            "type": "message",
                            "role": "assistant",
                            "model": message.get("model"),
                            "content": [block],
                            "stop_reason": None,
                            "usage": tokens,
                        },
                    )
                    yield line
                    parent = line["uuid"]
        elif kind == "compaction":
            boundary = chain(
                entry,
                "system",
                0,
                None,
                subtype="compact_boundary",
                content="Conversation compacted",
                level="info",
                logicalParentUuid=parent,
                compactMetadata={"trigger": "auto", "preTokens": 100000},
            )
            yield boundary
            line = chain(
                entry,
                "user",
                1,
                boundary["uuid"],
                isCompactSummary=True,
                message={"role": "user", "content": entry["summary"]},
            )
            yield line
        elif kind == "branch_summary":
            line = chain(
                entry,
                "user",
                0,
                parent,
                isMeta=True,
                message={"role": "user", "content": entry["summary"]},
            )
            yield line
        else:  # labels, model and thinking-level changes: nothing Claude writes, so
            if parent is not None:  # their children hang under their parent
                last_of[entry["id"]] = parent
            continue
        last_of[entry["id"]] = line["uuid"]
    title = header.get("title")
    if title:
        yield {"type": "custom-title", "customTitle": title, "sessionId": sid}


def claude_dir(built: corpus.Corpus) -> Path:
    return built.root / "claude"


def ensure(built: corpus.Corpus) -> tuple[Path, float | None]:
    """The Claude Code dir of ``built``'s sessions, converted only when missing or
    stale; returns it and the conversion time (None: from the cache)."""
    root = claude_dir(built)
    stamp = root / "stamp.json"
    wanted = orjson.dumps({"version": CONVERTER_VERSION, "files": len(built.files)})
    if stamp.exists() and stamp.read_bytes() == wanted:
        return root, None
    start = time.perf_counter()
    for path in built.files:
        objects = [orjson.loads(line) for line in path.read_bytes().splitlines() if line]
        header = objects[0]
        project = "-" + header["cwd"].lstrip("/").replace("/", "-")
        out = root / "projects" / project / f"{header['id']}.jsonl"
        out.parent.mkdir(parents=True, exist_ok=True)
        lines = session_lines(header, objects[1:])
        out.write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in lines))
    stamp.write_bytes(wanted)
    return root, time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--entries", type=int, default=400)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--out", type=Path, help="corpus dir (Claude dir = OUT/claude)")
    args = parser.parse_args(argv)
    built, _ = corpus.ensure(corpus.CorpusParams(args.sessions, args.entries, args.seed), args.out)
    root, elapsed = ensure(built)
    size = sum(p.stat().st_size for p in root.rglob("*.jsonl"))
    how = "cached" if elapsed is None else f"converted in {elapsed:.1f} s"
    print(f"{root}: {len(built.files)} Claude Code sessions, {size / 2**20:.0f} MB ({how})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
