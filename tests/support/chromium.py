"""Headless Chromium for the tests of ``transcript.html``: a page's DOM after it ran
(``--dump-dom``) and a screenshot, light or dark.

Debian's ``chromium`` package (``.ci/run`` installs it); `chromium_or_skip` skips a
test, saying why, only when it is not installed. Every run gets a fresh profile dir
and no network features, and is killed after `TIMEOUT` seconds.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

__all__ = ["TIMEOUT", "chromium_or_skip", "dump_dom", "screenshot"]

#: Seconds one Chromium run may take (a loaded machine starts it slowly).
TIMEOUT = 120
_FLAGS = (
    "--headless",
    "--no-sandbox",  # the tests run as root
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
)
_DARK = ("--force-dark-mode", "--blink-settings=preferredColorScheme=0")
_LIGHT = ("--blink-settings=preferredColorScheme=1",)


def chromium_or_skip() -> str:
    """The Chromium binary; skips the test when none is installed."""
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found is not None:
            return found
    pytest.skip("chromium is not installed (Debian: apt-get install chromium; .ci/run does)")


def _run(page: Path, *flags: str) -> subprocess.CompletedProcess[bytes]:
    binary = chromium_or_skip()
    with tempfile.TemporaryDirectory(prefix="sessionfs-chromium-") as profile:
        return subprocess.run(
            [binary, *_FLAGS, f"--user-data-dir={profile}", *flags, page.resolve().as_uri()],
            capture_output=True,
            timeout=TIMEOUT,
            check=True,
            stdin=subprocess.DEVNULL,
        )


def dump_dom(page: Path) -> str:
    """The page's DOM as Chromium serialises it once the page has loaded (and any
    script in it has run)."""
    return _run(page, "--dump-dom").stdout.decode("utf-8", "replace")


def screenshot(page: Path, out: Path, dark: bool = False, size: str = "900,1400") -> Path:
    """A PNG of the page's top ``size`` pixels, in the dark or the light scheme."""
    _run(page, *(_DARK if dark else _LIGHT), f"--window-size={size}", f"--screenshot={out}")
    return out
