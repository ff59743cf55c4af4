"""``transcript.html`` and ``tree.svg`` against ``transcript.md``: render time and size.

Run from the repo root: ``python -m bench.bench_html`` (``--entries N`` per session,
``--sessions N``). Sessions of the bench corpus's shape (``bench/corpus.py``: tool
calls and results, thinking, branches, images in the blob store), each rendered the way
the daemon renders it (`LoadedSession.rendered`, one parse shared per rendering), best
of 3. The page must cost no more than a small multiple of the Markdown: it escapes
every string once and folds, it does not reformat.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import Row, best_of, print_table
from bench.corpus import CorpusParams, generate
from sessionfs.view.loaded_session import LoadedSession
from sessionfs.view.session_ref import SessionRef

#: What the page may cost next to the Markdown (time and bytes).
TIME_TARGET = 3.0
SIZE_TARGET = 2.0


def _render(path: Path, what: str, blobs: Path) -> bytes:
    ref = SessionRef(path.parent.name, path.stem, path, {}, 0, 0)
    session = LoadedSession(ref=ref, blobs_dir=blobs)
    session.load()
    return session.rendered(what)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sessions", type=int, default=3)
    parser.add_argument("--entries", type=int, default=20_000)
    args = parser.parse_args(argv)
    params = CorpusParams(sessions=args.sessions, entries=args.entries)
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="bench-html-") as tmp:
        corpus = generate(params, Path(tmp))
        blobs = corpus.agent_dir / "blobs"
        for path in corpus.files:
            data = path.read_bytes()
            md_time, md = best_of(3, lambda p=path: _render(p, "transcript.md", blobs))
            size = f"{len(data) / 1e6:.1f} MB file"
            for what in ("transcript.html", "tree.svg"):
                took, out = best_of(3, lambda p=path, w=what: _render(p, w, blobs))
                ratio = took / md_time
                rows.append(
                    Row(
                        f"{what}, {size}",
                        f"{took:.3f} s",
                        f"{md_time:.3f} s md",
                        ratio,
                        f"<= {TIME_TARGET:g}x",
                        ratio <= TIME_TARGET,
                    )
                )
                if what == "transcript.html":
                    grow = len(out) / len(md)
                    rows.append(
                        Row(
                            f"{what} bytes, {size}",
                            f"{len(out) / 1e6:.2f} MB",
                            f"{len(md) / 1e6:.2f} MB md",
                            grow,
                            f"<= {SIZE_TARGET:g}x",
                            grow <= SIZE_TARGET,
                        )
                    )
    print_table("transcript.html and tree.svg against transcript.md (best of 3)", rows)
    return 0 if all(row.ok for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
