"""How light a PNG is: the mean luminance of its pixels (0 black .. 255 white), decoded
with the standard library (8-bit RGB or RGBA, non-interlaced: what Chromium's
screenshots are), for the tests that check a page's light and dark schemes."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

__all__ = ["mean_luminance"]

_CHANNELS = {2: 3, 6: 4}  # PNG colour type -> bytes per pixel (8-bit samples)


def _rows(data: bytes) -> tuple[int, int, int, bytes]:
    if not data.startswith(b"\x89PNG\r\n\x1a\n"):
        raise ValueError("not a PNG")
    pos, idat, width, height, kind = 8, [], 0, 0, 0
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        chunk, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        if chunk == b"IHDR":
            width, height, depth, kind, _, _, interlace = struct.unpack(">IIBBBBB", body)
            if depth != 8 or kind not in _CHANNELS or interlace:
                raise ValueError(f"unsupported PNG: depth {depth}, colour type {kind}")
        elif chunk == b"IDAT":
            idat.append(body)
        pos += 12 + length
    return width, height, _CHANNELS[kind], zlib.decompress(b"".join(idat))


def _paeth(a: int, b: int, c: int) -> int:
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    return a if pa <= pb and pa <= pc else b if pb <= pc else c


def mean_luminance(path: Path) -> float:
    """The mean of 0.299 R + 0.587 G + 0.114 B over every pixel."""
    width, height, bpp, raw = _rows(path.read_bytes())
    stride = width * bpp
    previous = bytearray(stride)
    total = 0.0
    pos = 0
    for _ in range(height):
        kind, line = raw[pos], bytearray(raw[pos + 1 : pos + 1 + stride])
        pos += 1 + stride
        for i in range(stride):
            left = line[i - bpp] if i >= bpp else 0
            up = previous[i]
            corner = previous[i - bpp] if i >= bpp else 0
            if kind == 1:
                line[i] = (line[i] + left) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + up) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 0xFF
            elif kind == 4:
                line[i] = (line[i] + _paeth(left, up, corner)) & 0xFF
        total += sum(
            0.299 * line[i] + 0.587 * line[i + 1] + 0.114 * line[i + 2]
            for i in range(0, stride, bpp)
        )
        previous = line
    return total / (width * height)
