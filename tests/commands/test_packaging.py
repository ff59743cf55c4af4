"""The mount manual has one source, docs/mount.md, and reaches the mount from both an
editable install (this checkout) and a built wheel (a real file in the package)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from support.fixture_paths import REPO

from sessionfs.fs.nodes.root import mount_manual

MANUAL = REPO / "docs" / "mount.md"
BUILD_TIMEOUT = 240
#: What a build reads: the package sources, their metadata, and the manual they link to.
BUILD_INPUTS = ("pyproject.toml", "README.md", "LICENSE", "core", "sessionfs", "docs")


def source_tree_copy(target: Path) -> Path:
    """The build inputs, symlinks kept as symlinks (pip builds a local dir in place,
    and its build/ dir must not land in the checkout)."""
    target.mkdir()
    for name in BUILD_INPUTS:
        source = REPO / name
        if source.is_dir():
            ignore = shutil.ignore_patterns("__pycache__")
            shutil.copytree(source, target / name, symlinks=True, ignore=ignore)
        else:
            shutil.copy2(source, target / name)
    return target


def test_the_installed_package_reads_docs_mount_md() -> None:
    assert mount_manual() == MANUAL.read_bytes()


def test_a_wheel_carries_the_manual_as_a_regular_file(tmp_path: Path) -> None:
    # The package's mount.md is a symlink into docs/; a wheel must hold its content.
    tree = source_tree_copy(tmp_path / "src")
    assert (tree / "sessionfs" / "mount.md").is_symlink()
    out = tmp_path / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(tree)],
        check=True,
        capture_output=True,
        timeout=BUILD_TIMEOUT,
    )
    (wheel,) = out.glob("sessionfs-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        assert archive.read("sessionfs/mount.md") == MANUAL.read_bytes()
        assert any(name.endswith("/licenses/LICENSE") for name in archive.namelist())
