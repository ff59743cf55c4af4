"""What a call allocates, as ``tracemalloc`` sees it: `traced`."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable
from typing import TypeVar

__all__ = ["traced"]

T = TypeVar("T")


def traced(call: Callable[[], T]) -> tuple[T, int, int]:
    """``call()``'s result, the memory it allocated and still held when it returned,
    and the peak of what it allocated meanwhile (bytes)."""
    tracemalloc.start()
    try:
        result = call()
        held, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return result, held, peak
