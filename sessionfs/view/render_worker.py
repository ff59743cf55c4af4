"""What a render worker runs: ``render_transcript`` (the job) and ``exit_with`` (its
initializer), for `sessionfs.view.prerender`'s process pool.

A worker is a ``spawn``ed interpreter that imports this module to unpickle its first
job, and a first ``grep -r`` over ``transcripts/`` waits for that import: with the
daemon's modules it cost as much CPU as rendering the 60 sessions it then rendered.
So this module imports only what rendering needs: no trio, no pyfuse3, no command line,
no search index (`tests/view/test_render_worker.py` holds it to that); the agent
registry only for another agent's file (`_open_other`).
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import select
import threading
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from core.errors import NotASessionError
from core.formats.base import SessionSource
from core.formats.lines import set_whole_read_limit
from core.private_files import make_private_dirs
from core.session_stat import session_stat
from core.zstd_files import (
    ZSTD_SUFFIX,
    TextPastItsBound,
    file_text_info,
    file_text_size,
    text_size_words,
)
from sessionfs.view.access import FileAccess
from sessionfs.view.html_images import BlobFiles
from sessionfs.view.loaded_session import LoadedSession
from sessionfs.view.render_cache import TRANSCRIPT, CachedRender, FileIdentity, RenderCache
from sessionfs.view.renderings import render_source
from sessionfs.view.session_ref import SessionRef
from sessionfs.view.streamed_files import (
    STREAMED,
    STREAMED_AGENTS,
    NotStreamable,
    StreamedFile,
    open_streamed,
)

__all__ = [
    "EXTRA_SIZES",
    "TRIM_AFTER_BYTES",
    "RenderFailed",
    "RenderOutcome",
    "StreamedSibling",
    "TooBigToHold",
    "exit_with",
    "render_transcript",
]

log = logging.getLogger(__name__)

#: After rendering a session file this big, a worker hands the freed heap back to the
#: system at once (``malloc_trim``) rather than keeping it until it is replaced.
TRIM_AFTER_BYTES = 16 * 2**20
#: Renderings whose sizes a worker also records (cheap next to the transcript).
EXTRA_SIZES = ("header.json", "title")


class RenderFailed(Exception):
    """The session file is gone or no longer a session."""


class TooBigToHold(Exception):
    """A rendering of a file too big to hold could not be written to the cache dir
    (the reason is the message)."""


@dataclass(frozen=True, slots=True)
class RenderOutcome:
    record: CachedRender
    #: the transcript, when it was not stored or the caller asked for the bytes
    data: bytes | None
    #: True when the worker parsed the session (False: a valid cache file was found)
    rendered: bool


def render_transcript(
    path: str,
    key: str,
    cache_root: str | None,
    want_bytes: bool,
    agent: str = "xcsh",
    what: str = TRANSCRIPT,
    blobs_dir: str | None = None,
    stream_over: int | None = None,
    also_streamed: tuple[StreamedSibling, ...] = (),
    siblings_over: int | None = None,
) -> RenderOutcome:
    """In a worker: the transcript of the session file ``path`` (written by ``agent``)
    from its cache file when valid, else rendered (and stored). Raises `RenderFailed`
    for a non-session. ``what``: the rendering (``transcript.html`` for the pages,
    with images inlined from ``blobs_dir``, ``context.json`` for the contexts of big
    files). A file bigger than ``stream_over`` bytes (a compressed one's text:
    `core.zstd_files.file_text_size`) is rendered into its cache file
    piece by piece where it can be (`_render_streamed`): the bytes are then never
    handed back, whatever ``want_bytes`` says; ``also_streamed``: the other renderings
    written then from the same index, into their own cache dirs, when the file is
    bigger than ``siblings_over`` too (a smaller one's are left to their own jobs:
    each first read pays for its own rendering, not for three)."""
    cache = RenderCache(Path(cache_root), what) if cache_root is not None else None
    try:
        before = FileIdentity.of(session_stat(path))
    except OSError as exc:
        raise RenderFailed(f"{path}: {exc}") from None
    if cache is not None and not want_bytes:
        record = cache.validate(key, before)  # the head only: the daemon preads the body
        if record is not None:
            return RenderOutcome(record, None, rendered=False)
    elif cache is not None:
        found = cache.load(key, before)
        if found is not None:
            return RenderOutcome(found[0], found[1], rendered=False)
    size = file_text_size(path, before.size, before.mtime_ns)  # a compressed file's: its text's
    if stream_over is not None and size > stream_over:
        asked = (what, cache, blobs_dir)
        if siblings_over is not None and size <= siblings_over:
            also_streamed = ()
        streamed = _render_streamed(path, key, before, agent, asked, also_streamed)
        if streamed is not None:
            return streamed
    # Another agent's file over the limit is rendered in memory, its bytes left on disk.
    held_whole_up_to = set_whole_read_limit(stream_over)
    try:
        transcript, sizes = _render(Path(path), agent, what, blobs_dir)
    finally:
        set_whole_read_limit(held_whole_up_to)
    if size >= TRIM_AFTER_BYTES:
        _trim_heap()
    # Keyed by the identity seen *before* reading: if the file grew meanwhile, the
    # record is stale at once and the next access renders again (never the reverse).
    stored = cache.store(key, before, sizes, transcript) if cache is not None else None
    if stored is None:
        return RenderOutcome(CachedRender(before, sizes, body=what), transcript, rendered=True)
    return RenderOutcome(stored, transcript if want_bytes else None, rendered=True)


#: A rendering the job that streams another also writes: (what, its cache dir, the
#: blob store its images come from).
StreamedSibling = tuple[str, str, str | None]


def _render_streamed(
    path: str,
    key: str,
    before: FileIdentity,
    agent: str,
    asked: tuple[str, RenderCache | None, str | None],
    also: tuple[StreamedSibling, ...] = (),
) -> RenderOutcome | None:
    """``asked`` (the rendering, its cache, the blob store of a page's images) of a
    session file too big to hold parsed, written into its cache file a message at a
    time (`sessionfs.view.streamed_files`); ``None`` when that is not how this file or
    rendering is made (an agent's not in `STREAMED_AGENTS`, a branch page, an xcsh
    file at an older format version: rendered in memory as any other). `TooBigToHold`
    when the cache file cannot be written (a full disk, no cache dir): there is no
    other place for it.

    Indexing the file is most of the work (~2 s for 500 MB), so the renderings in
    ``also`` are written then too, from the same index, unless their cache files are
    valid already: the next of them asked for is found there (a failure to write one
    is left to its own job)."""
    what, cache, blobs_dir = asked
    if agent not in STREAMED_AGENTS or what not in STREAMED:
        return None
    try:
        index = open_streamed(agent, path, _decompress_dir(cache, path))
    except NotStreamable:
        return None
    except TextPastItsBound as exc:  # a session still: too big, not gone (EFBIG)
        raise TooBigToHold(f"{what}: {exc.strerror}") from None
    except (NotASessionError, OSError) as exc:
        raise RenderFailed(f"{path}: {exc}") from None
    try:
        stored = _store_streamed(index, key, before, what, cache, blobs_dir)
    except (OSError, LookupError, TypeError, ValueError) as exc:
        # A file shrunk or rewritten in place after it was indexed reads back other
        # bytes than those indexed: not a session as indexed any more (the next access
        # renders it again); anything else is a bug, raised as it is.
        if _changed_since(path, before):
            raise RenderFailed(f"{path}: changed while it was rendered ({exc})") from None
        raise
    if stored is None and _changed_since(path, before):  # (the write was cut short)
        raise RenderFailed(f"{path}: changed while it was rendered")
    if stored is None:
        text = file_text_info(path, before.size, before.mtime_ns)  # (remembered: no second read)
        raise TooBigToHold(
            f"{what}: {text_size_words(path, text)}, too big to render in "
            "memory, and its rendering cannot be written to the cache dir (full, or "
            "not writable)"
        )
    for other, root, other_blobs in also:
        sibling = RenderCache(Path(root), other)
        try:
            if other in STREAMED and sibling.validate(key, before) is None:
                _store_streamed(index, key, before, other, sibling, other_blobs)
        except Exception:  # a bug there must not fail what was asked: its own job says
            if not _changed_since(path, before):
                log.exception("%s of %s, written with %s", other, path, what)
    return RenderOutcome(stored, None, rendered=True)


def _decompress_dir(cache: RenderCache | None, path: str) -> str | None:
    """Where a compressed session file's text is decompressed to be streamed: the
    cache dir (a file without a name there, 0600, gone after the job); ``None``: none
    (it is then rendered in memory, read whole), or ``path`` is not compressed."""
    if cache is None or not path.endswith(ZSTD_SUFFIX):
        return None
    try:
        make_private_dirs(cache.root)
    except OSError:
        return None
    return str(cache.root)


def _changed_since(path: str, before: FileIdentity) -> bool:
    try:
        return FileIdentity.of(session_stat(path)) != before
    except OSError:
        return True


def _store_streamed(
    index: StreamedFile,
    key: str,
    before: FileIdentity,
    what: str,
    cache: RenderCache | None,
    blobs_dir: str | None,
) -> CachedRender | None:
    """Rendering ``what`` of ``index`` written into ``cache`` (``None``: it could not)."""
    if cache is None:
        return None
    extra = {}
    if what == TRANSCRIPT:
        source = index.source()
        extra = {name: len(render_source(source, name, path=index.path)) for name in EXTRA_SIZES}
    images = None
    fd = index.file_descriptor()
    if blobs_dir is not None and fd is not None:
        # Read for whoever may read the file indexed (the daemon's rule, `BlobFiles`).
        images = BlobFiles(Path(blobs_dir), FileAccess.of(os.fstat(fd)))
    write = partial(index.write, what, images=images)
    return cache.store_streamed(key, before, extra, write)


def _render(
    path: Path, agent: str, what: str, blobs_dir: str | None
) -> tuple[bytes, dict[str, int]]:
    """Load the session as the daemon does and render ``what``: an xcsh file compact
    (one read, one parse of each line, no manager; an older format version is parsed
    and migrated), another agent's through the reader the daemon opens it with."""
    ref = SessionRef(path.parent.name, path.name.removesuffix(".jsonl"), path, {}, 0, 0)
    opener = None if agent == "xcsh" else partial(_open_other, agent)
    blobs = Path(blobs_dir) if blobs_dir is not None else None
    session = LoadedSession(ref=ref, opener=opener, blobs_dir=blobs)
    try:
        session.load(warm=what)
    except TextPastItsBound as exc:  # (as `_render_streamed`)
        raise TooBigToHold(f"{what}: {exc.strerror}") from None
    except (NotASessionError, OSError) as exc:
        raise RenderFailed(f"{path}: {exc}") from None
    body = session.rendered(what)
    sizes = {what: len(body)}
    if what == TRANSCRIPT:
        sizes.update({name: len(session.rendered(name)) for name in EXTRA_SIZES})
    return body, sizes


def _open_other(agent: str, ref: SessionRef) -> SessionSource:
    # Imported here: the agent registry (every agent's reader and search code) is for
    # other agents' files only, and a worker rendering xcsh sessions never needs it.
    from sessionfs.view.agent_sources import open_agent_file

    return open_agent_file(agent, ref.path)


def _trim_heap() -> None:
    """Give the heap's free memory back to the system (glibc's ``malloc_trim``; a libc
    without it keeps it until the worker is replaced)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).malloc_trim(0)


def exit_with(daemon_pid: int) -> None:
    """Worker initializer: end this worker as soon as the daemon is gone, however it
    ended (a SIGKILLed daemon runs no shutdown, and a worker blocked on its job queue
    would otherwise live on)."""
    try:
        pidfd = os.pidfd_open(daemon_pid)
    except OSError:
        os._exit(0)  # already gone

    def watch() -> None:
        select.select([pidfd], [], [])  # readable once the process has exited
        os._exit(0)

    threading.Thread(target=watch, name="exit-with-daemon", daemon=True).start()
