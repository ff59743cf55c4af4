"""How long work has left and how much it moved, as people read it: the search
index's first build in the root ``ctl`` and in ``sessionfs search``, ``sessionfs
sync``'s progress line and summary."""

from __future__ import annotations

__all__ = ["eta_text", "rate_text", "size_text"]

_MB = 1024 * 1024


def eta_text(elapsed: float, done: float, total: float) -> str | None:
    """``~12 s left`` at the rate so far (``done`` of ``total`` in ``elapsed``
    seconds); None while nothing is done yet (no rate to go by) or all is."""
    if done <= 0 or elapsed <= 0 or done >= total:
        return None
    left = elapsed * (total - done) / done
    if left < 90:
        return f"~{max(1, round(left))} s left"
    if left < 90 * 60:
        return f"~{round(left / 60)} min left"
    return f"~{left / 3600:.1f} h left"


def size_text(size: float) -> str:
    """Bytes as ``12.3 MB`` (``0.4 MB`` for small ones: one unit reads best in a
    line that changes)."""
    if size >= 1024 * _MB:
        return f"{size / (1024 * _MB):.2f} GB"
    return f"{size / _MB:.1f} MB"


def rate_text(size: float, elapsed: float) -> str:
    """``4.1 MB/s``; ``-`` before any time has passed."""
    return f"{size_text(size / elapsed)}/s" if elapsed > 0 else "-"
