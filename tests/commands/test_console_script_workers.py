"""``sessionfs mount --foreground`` run as the console script (as the systemd unit runs
it): the render workers multiprocessing spawns do not import the command line again
(`sessionfs.commands.cli.run_as_package_main`)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

#: The console script's shape (what the installer writes), then what the daemon does
#: before its first render: a spawned worker, asked whether it imported the command line.
SCRIPT = """\
import sys
from sessionfs.commands.cli import main, run_as_package_main
if __name__ == "__main__":
    if sys.argv[1] == "as-package-main":
        run_as_package_main()
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    spawn = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(1, mp_context=spawn) as pool:
        asked = "'sessionfs.commands.cli' in __import__('sys').modules"
        print(pool.submit(eval, asked).result(timeout=60))
"""


@pytest.mark.parametrize(("how", "imported"), [("as-package-main", "False"), ("plain", "True")])
def test_a_worker_of_the_console_script_skips_the_command_line(
    tmp_path: Path, how: str, imported: str
) -> None:
    script = tmp_path / "bin" / "sessionfs"
    script.parent.mkdir()
    script.write_text(SCRIPT)
    out = subprocess.run(
        [sys.executable, str(script), how], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [imported]
