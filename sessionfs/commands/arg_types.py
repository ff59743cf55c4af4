"""argparse ``type=`` converters shared by the commands."""

from __future__ import annotations

import argparse
from collections.abc import Callable

__all__ = ["int_between"]


def int_between(low: int, high: int) -> Callable[[str], int]:
    """An integer from ``low`` to ``high`` (both included); anything else is a usage
    error that says what was wrong."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be between {low} and {high}")
        return value

    return parse
