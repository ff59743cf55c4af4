"""``sessionfs completion bash|zsh|fish``: the scripts, printed by the real command,
loaded into the real shells. bash: ``complete -p`` and the completion function called
with ``COMP_WORDS``; zsh: a real TAB in an interactive zsh (through tmux); fish:
``complete -C``. What they complete is checked against the argparse parser itself
(every subcommand and every option of every subcommand), and ``umount`` completes the
sessionfs mounts in use (one whose path has a space included)."""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.mount import COMMAND_TIMEOUT, REPO, MountFactory, load_demo_module

from core.agent_homes import OTHER_AGENTS
from sessionfs.commands.cli import build_parser


def script(shell: str) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "sessionfs", "completion", shell],
        cwd=REPO, capture_output=True, text=True, timeout=COMMAND_TIMEOUT, check=True,
    )  # fmt: skip
    return result.stdout


def parser_paths(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> dict[tuple[str, ...], tuple[set[str], set[str]]]:
    """(subcommands, option strings) of every command, read from argparse directly."""
    subcommands: set[str] = set()
    options: set[str] = set()
    found = {}
    for action in parser._actions:
        if action.help == argparse.SUPPRESS:
            continue
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                subcommands.add(name)
                found.update(parser_paths(sub, (*path, name)))
        else:
            options.update(action.option_strings)
    found[path] = (subcommands, options)
    return found


def bash_complete(tmp_path: Path, *lines: str) -> list[list[str]]:
    """The completions bash gives for each command line (its last word is completed)."""
    (tmp_path / "completion.bash").write_text(script("bash"))
    calls = "\n".join(
        f"COMP_WORDS=({line}); COMP_CWORD=$((${{#COMP_WORDS[@]}} - 1)); COMPREPLY=(); "
        "_sessionfs; printf '%s\\n' \"${COMPREPLY[@]}\"; echo '--end--'"
        for line in lines
    )
    result = subprocess.run(
        ["bash", "--norc", "-c", f"source completion.bash\n{calls}"],
        cwd=tmp_path, capture_output=True, text=True, timeout=COMMAND_TIMEOUT, check=True,
    )  # fmt: skip
    chunks = result.stdout.split("--end--\n")[:-1]
    return [sorted(filter(None, chunk.split("\n"))) for chunk in chunks]


def test_bash_completes_every_subcommand_and_option_of_the_parser(tmp_path: Path) -> None:
    expected = parser_paths(build_parser())
    lines = []
    for path in expected:
        words = " ".join(["sessionfs", *path])
        lines += [f"{words} ''", f"{words} -"]
    got = bash_complete(tmp_path, *lines)
    for n, (path, (subcommands, options)) in enumerate(expected.items()):
        if subcommands:
            assert set(got[2 * n]) == subcommands, path
        assert set(got[2 * n + 1]) == options, path
    assert "umount" in expected[()][0] and "--agent-dir" in expected[("mount",)][1]
    registered = subprocess.run(
        ["bash", "--norc", "-c", f'eval "$(cat {tmp_path / "completion.bash"})"; complete -p'],
        capture_output=True, text=True, timeout=COMMAND_TIMEOUT, check=True,
    )  # fmt: skip
    assert "complete -F _sessionfs sessionfs" in registered.stdout


def test_bash_completes_values(tmp_path: Path) -> None:
    (tmp_path / "agent-a").mkdir()
    (tmp_path / "agent-file").write_text("")
    got = bash_complete(
        tmp_path,
        "sessionfs mount --agent-dir agent",
        "sessionfs mount --agents c",
        "sessionfs search --limit ''",
        "sessionfs mount --foreground agent",  # a flag takes no value: the mountpoint
        "sessionfs history search --l",
        "sessionfs check agent",
        "sessionfs completion ''",
        "sessionfs mount mnt --ca",
    )
    assert got == [
        ["agent-a"],
        [name for name in OTHER_AGENTS if name.startswith("c")],
        [],
        ["agent-a"],
        ["--limit"],
        ["agent-a", "agent-file"],
        ["bash", "fish", "zsh"],
        ["--cache-dir", "--cache-mb"],
    ]


@pytest.mark.fuse
def test_umount_completes_the_sessionfs_mounts_in_use(
    tmp_path: Path, mount_factory: MountFactory
) -> None:
    agent = tmp_path / "agent"
    load_demo_module().generate(agent)
    mount = mount_factory(agent, "--no-agents", name="with space")
    got = bash_complete(tmp_path, f"sessionfs umount {tmp_path}/")[0]
    assert got == [str(mount.path)]  # /proc/self/mounts says "with\\040space"
    assert bash_complete(tmp_path, "sessionfs umount /pro")[0] == []  # not sessionfs
    if shutil.which("fish") is not None:
        assert str(mount.path) in fish_complete(tmp_path, f"sessionfs umount {tmp_path}/")


def fish_complete(tmp_path: Path, line: str) -> list[str]:
    (tmp_path / "completion.fish").write_text(script("fish"))
    result = subprocess.run(
        ["fish", "--no-config", "-c", f"source completion.fish; complete -C {line!r}"],
        cwd=tmp_path, capture_output=True, text=True, timeout=COMMAND_TIMEOUT, check=True,
    )  # fmt: skip
    return [row.split("\t")[0] for row in result.stdout.splitlines()]


@pytest.mark.skipif(shutil.which("fish") is None, reason="fish is not installed (CI has none)")
def test_fish(tmp_path: Path) -> None:
    (tmp_path / "agent-a").mkdir()
    expected = parser_paths(build_parser())
    assert set(fish_complete(tmp_path, "sessionfs ")) == expected[()][0]
    long_options = {o for o in expected[("mount",)][1] if o.startswith("--")}
    assert set(fish_complete(tmp_path, "sessionfs mount --")) == long_options
    assert sorted(fish_complete(tmp_path, "sessionfs mount --agents ")) == sorted(OTHER_AGENTS)
    assert set(fish_complete(tmp_path, "sessionfs history ")) == {"search"}
    search = {o for o in expected[("history", "search")][1] if o.startswith("--")}
    assert set(fish_complete(tmp_path, "sessionfs history search --")) == search
    assert fish_complete(tmp_path, "sessionfs mount --agent-dir agent") == ["agent-a/"]


@pytest.mark.skipif(
    shutil.which("zsh") is None or shutil.which("tmux") is None,
    reason="zsh or tmux is not installed (.ci/run installs both)",
)
def test_zsh_completes_on_tab(tmp_path: Path) -> None:
    """A real interactive zsh (compinit, the script eval'ed as the README says): TAB
    completes a subcommand, an option, then an option's value."""
    (tmp_path / "completion.zsh").write_text(script("zsh"))
    (tmp_path / "agent-only").mkdir()
    (tmp_path / ".zshrc").write_text(
        "PS1='ready> '\nautoload -U compinit && compinit -u\n"
        f'eval "$(cat {tmp_path / "completion.zsh"})"\n'
    )
    socket = str(tmp_path / "tmux")
    path = f"{Path(sys.executable).parent}:{os.environ['PATH']}"  # the venv's sessionfs
    env = {**os.environ, "ZDOTDIR": str(tmp_path), "PATH": path}

    def tmux(*args: str) -> str:
        return subprocess.run(
            ["tmux", "-S", socket, *args], capture_output=True, text=True,
            timeout=COMMAND_TIMEOUT, check=True, env=env,
        ).stdout  # fmt: skip

    def wait_for(text: str) -> None:
        deadline = time.monotonic() + COMMAND_TIMEOUT
        while text not in (screen := tmux("capture-pane", "-p")):
            assert time.monotonic() < deadline, f"zsh never showed {text!r}: {screen}"
            time.sleep(0.1)

    tmux("new-session", "-d", "-x", "150", "-y", "10", "-c", str(tmp_path), "zsh -i")
    try:
        wait_for("ready>")
        tmux("send-keys", "-l", "--", "sessionfs mou")
        tmux("send-keys", "Tab")
        wait_for("ready> sessionfs mount")  # (the screen shows no trailing space)
        tmux("send-keys", "-l", "--", "--read-o")
        tmux("send-keys", "Tab")
        wait_for("ready> sessionfs mount --read-only")
        tmux("send-keys", "-l", "--", "--agent-dir agent-o")
        tmux("send-keys", "Tab")
        wait_for("--agent-dir agent-only")
    finally:
        subprocess.run(["tmux", "-S", socket, "kill-server"], check=False, timeout=10)
