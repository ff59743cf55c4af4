"""``sessionfs completion bash|zsh|fish``: a completion script for this command line.

The script is made from the CLI's own argparse parser each time it is printed
(`command_tree`), so it completes exactly the subcommands and options ``sessionfs``
has, and cannot drift from them. What an option's value or a positional argument
completes to is read from the parser too (`value_kind`): directories for ``DIR``
values and mount points, files for paths, the choices of a choice, and for
``umount`` the sessionfs mounts in use (the shell reads ``/proc/self/mounts`` when
completing: fsname ``sessionfs``, type ``fuse.sessionfs``).

Install (see the README):

    sessionfs completion bash > ~/.local/share/bash-completion/completions/sessionfs
    eval "$(sessionfs completion zsh)"    # in ~/.zshrc, after compinit
    sessionfs completion fish > ~/.config/fish/completions/sessionfs.fish
"""

from __future__ import annotations

import argparse
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "DIRS",
    "FILES",
    "MOUNTS",
    "NOTHING",
    "Command",
    "Option",
    "add_completion_parser",
    "command_tree",
    "completes",
    "script_for",
]

#: what a value completes to; ``words <w>...`` completes to those words
DIRS, FILES, MOUNTS, NOTHING = "dirs", "files", "mounts", "nothing"
SHELLS = ("bash", "zsh", "fish")


def completes(action: argparse.Action, kind: str) -> argparse.Action:
    """Say what ``action``'s value completes to, where the parser alone cannot tell
    (``umount``'s mount point: a sessionfs mount in use). Returns ``action``."""
    action.completion = kind  # type: ignore[attr-defined]
    return action


def words(*choices: str) -> str:
    return " ".join(("words", *choices))


@dataclass(frozen=True)
class Option:
    names: tuple[str, ...]
    help: str
    #: what its value completes to; None: a flag, it takes no value
    value: str | None


@dataclass(frozen=True)
class Command:
    """One (sub)command: ``path`` is the words that lead to it (``()``: the program)."""

    path: tuple[str, ...]
    subcommands: tuple[tuple[str, str], ...]  # (name, help)
    options: tuple[Option, ...]
    positionals: tuple[str, ...]  # what each positional completes to, in order
    #: the last positional takes any number of words
    repeats: bool


def value_kind(action: argparse.Action) -> str:
    """What a value of ``action`` completes to, as the parser tells it."""
    hint = getattr(action, "completion", None)
    if isinstance(hint, str):
        return hint
    if action.choices is not None and not isinstance(action, argparse._SubParsersAction):
        return words(*(str(choice) for choice in action.choices))
    metavar = str(action.metavar or "")
    if metavar == "DIR" or action.dest.endswith("_dir") or action.dest == "mountpoint":
        return DIRS
    if action.type is Path or metavar in ("PATH", "FILE"):
        return FILES
    return NOTHING


def command_tree(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> list[Command]:
    """Every command of ``parser``, the program first, then each subcommand's."""
    subcommands: list[tuple[str, str]] = []
    children: list[Command] = []
    options: list[Option] = []
    positionals: list[str] = []
    repeats = False
    for action in parser._actions:
        if action.help == argparse.SUPPRESS:
            continue
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            for name, sub in action.choices.items():
                subcommands.append((name, helps.get(name, "")))
                children += command_tree(sub, (*path, name))
        elif action.option_strings:
            value = None if action.nargs == 0 else value_kind(action)
            options.append(Option(tuple(action.option_strings), action.help or "", value))
        else:
            positionals.append(value_kind(action))
            repeats = action.nargs in ("*", "+", argparse.REMAINDER)
    command = Command(path, tuple(subcommands), tuple(options), tuple(positionals), repeats)
    return [command, *children]


# -- bash ------------------------------------------------------------------------------
#
# One function walks the words before the cursor: a word naming a subcommand of the
# command so far descends into it, an option that takes a value skips that value, any
# other word is a positional. The tables it asks are functions made from the parser.

_BASH_HEAD = r"""# sessionfs completion for bash, made by `sessionfs completion bash` from the
# command's own parser. Install: sessionfs completion bash > \
#   ~/.local/share/bash-completion/completions/sessionfs   (or: eval "$(sessionfs completion bash)")

_sessionfs_mounts() {
    # the sessionfs mounts in use (/proc/self/mounts escapes spaces as \040)
    local fs dir type rest
    while read -r fs dir type rest; do
        [[ $fs == sessionfs && $type == fuse* ]] && printf '%b\n' "$dir"
    done < /proc/self/mounts
}

_sessionfs_complete_kind() {
    # COMPREPLY for a value of kind $1 (dirs, files, mounts, nothing, words ...)
    local kind=$1 cur=$2 m
    case $kind in
        dirs) compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -d -- "$cur")) ;;
        files) compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -f -- "$cur")) ;;
        mounts)
            COMPREPLY=()
            while IFS= read -r m; do
                [[ $m == "$cur"* ]] && COMPREPLY+=("$m")
            done < <(_sessionfs_mounts)
            ;;
        words\ *) COMPREPLY=($(compgen -W "${kind#words }" -- "$cur")) ;;
        *) COMPREPLY=() ;;
    esac
}

_sessionfs() {
    # zsh (through bashcompinit) counts array elements from 1 unless told otherwise
    [[ -n ${ZSH_VERSION-} ]] && setopt local_options ksh_arrays
    local cur=${COMP_WORDS[COMP_CWORD]} path="" word i positional=0 skip=0
    for ((i = 1; i < COMP_CWORD; i++)); do
        word=${COMP_WORDS[i]}
        if ((skip)); then skip=0; continue; fi
        if [[ $word == -* ]]; then
            [[ $word != *=* && " $(_sessionfs_valued "$path") " == *" $word "* ]] && skip=1
        elif [[ " $(_sessionfs_subcommands "$path") " == *" $word "* ]]; then
            path="${path:+$path }$word"; positional=0
        else
            positional=$((positional + 1))
        fi
    done
    if ((skip)); then
        word=${COMP_WORDS[COMP_CWORD - 1]}
        _sessionfs_complete_kind "$(_sessionfs_value_kind "${path:+$path }$word")" "$cur"
        return
    fi
    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$(_sessionfs_options "$path")" -- "$cur"))
        return
    fi
    local subcommands
    subcommands=$(_sessionfs_subcommands "$path")
    if [[ -n $subcommands && $positional == 0 ]]; then
        COMPREPLY=($(compgen -W "$subcommands" -- "$cur"))
        return
    fi
    _sessionfs_complete_kind "$(_sessionfs_positional_kind "$path" "$positional")" "$cur"
}
"""


def _case(function: str, rows: list[tuple[str, str]], arguments: str) -> str:
    """A bash function printing the value of the first pattern that matches."""
    lines = [f"{function}() {{", f"    case {arguments} in"]
    lines += [f"        {pattern}) echo {shlex.quote(value)} ;;" for pattern, value in rows]
    lines += ["    esac", "}", ""]
    return "\n".join(lines)


def _bash_pattern(*words: str) -> str:
    return shlex.quote(" ".join(words))


def bash_script(commands: list[Command]) -> str:
    subcommands, options, valued, values, positionals = [], [], [], [], []
    for command in commands:
        key = _bash_pattern(*command.path)
        subcommands.append((key, " ".join(name for name, _ in command.subcommands)))
        names = [name for option in command.options for name in option.names]
        options.append((key, " ".join(names)))
        valued.append(
            (key, " ".join(n for o in command.options if o.value is not None for n in o.names))
        )
        for option in command.options:
            for name in option.names:
                if option.value is not None:
                    values.append((_bash_pattern(*command.path, name), option.value))
        for index, kind in enumerate(command.positionals):
            positionals.append((_bash_pattern(" ".join(command.path), str(index)), kind))
        if command.repeats:
            last = command.positionals[-1]
            positionals.append((_bash_pattern(" ".join(command.path), "") + "*", last))
    return "\n".join(
        [
            _BASH_HEAD,
            _case("_sessionfs_subcommands", subcommands, '"$1"'),
            _case("_sessionfs_options", options, '"$1"'),
            _case("_sessionfs_valued", valued, '"$1"'),
            _case("_sessionfs_value_kind", values, '"$1"'),
            _case("_sessionfs_positional_kind", positionals, '"$1 $2"'),
            "complete -F _sessionfs sessionfs",
            "",
        ]
    )


# -- zsh -------------------------------------------------------------------------------
#
# The same walk and tables as bash (zsh runs the bash functions through bashcompinit,
# which ships with zsh), so both shells complete exactly alike.

_ZSH_HEAD = """# sessionfs completion for zsh, made by `sessionfs completion zsh` from the
# command's own parser. Install: in ~/.zshrc, after compinit:
#   eval "$(sessionfs completion zsh)"
autoload -U +X bashcompinit && bashcompinit
"""


def zsh_script(commands: list[Command]) -> str:
    return _ZSH_HEAD + bash_script(commands)


# -- fish ------------------------------------------------------------------------------


def _fish_quote(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _fish_condition(command: Command, every: list[Command]) -> str:
    """fish's test that the words so far lead to ``command`` (and no further)."""
    if not command.path:
        return "__fish_use_subcommand"
    parts = [f"__fish_seen_subcommand_from {command.path[-1]}"]
    if len(command.path) > 1:
        parts.insert(0, f"__fish_seen_subcommand_from {command.path[-2]}")
    else:  # `search`, not `history search`
        parents = [c.path[0] for c in every if c.path[1:] == command.path]
        if parents:
            parts.append(f"not __fish_seen_subcommand_from {' '.join(parents)}")
    deeper = [c.path[-1] for c in every if len(c.path) == len(command.path) + 1
              and c.path[:-1] == command.path]  # fmt: skip
    if deeper:
        parts.append(f"not __fish_seen_subcommand_from {' '.join(deeper)}")
    return "; and ".join(parts)


def _fish_values(kind: str) -> str:
    if kind == DIRS:
        return "-f -a '(__fish_complete_directories)'"
    if kind == FILES:
        return "-F"
    if kind == MOUNTS:
        return "-f -a '(__sessionfs_mounts)'"
    if kind.startswith("words "):
        return "-f -a " + _fish_quote(kind.removeprefix("words "))
    return "-f"


def fish_script(commands: list[Command]) -> str:
    lines = [
        "# sessionfs completion for fish, made by `sessionfs completion fish` from the",
        "# command's own parser. Install:",
        "#   sessionfs completion fish > ~/.config/fish/completions/sessionfs.fish",
        "function __sessionfs_mounts",
        "    # the sessionfs mounts in use (/proc/self/mounts escapes spaces as \\040)",
        "    while read -l fs dir type rest",
        "        if test $fs = sessionfs; and string match -q 'fuse*' -- $type",
        "            printf '%b\\n' $dir",
        "        end",
        "    end < /proc/self/mounts",
        "end",
        "complete -c sessionfs -f",
    ]
    for command in commands:
        condition = _fish_quote(_fish_condition(command, commands))
        for name, help in command.subcommands:
            lines.append(f"complete -c sessionfs -n {condition} -a {name} -d {_fish_quote(help)}")
        for option in command.options:
            flags = " ".join(
                f"-l {n[2:]}" if n.startswith("--") else f"-s {n[1:]}" for n in option.names
            )
            value = "" if option.value is None else " -r " + _fish_values(option.value)
            lines.append(
                f"complete -c sessionfs -n {condition} {flags}{value} -d {_fish_quote(option.help)}"
            )
        kinds = set(command.positionals) - {NOTHING}
        if not command.subcommands and kinds:
            for kind in sorted(kinds):  # fish cannot tell the positionals apart
                lines.append(f"complete -c sessionfs -n {condition} {_fish_values(kind)}")
    return "\n".join(lines) + "\n"


def script_for(shell: str, parser: argparse.ArgumentParser) -> str:
    commands = command_tree(parser)
    return {"bash": bash_script, "zsh": zsh_script, "fish": fish_script}[shell](commands)


def add_completion_parser(subparsers: Any, root: argparse.ArgumentParser) -> None:
    """Add ``completion`` to ``root``'s sub-parser set; the script it prints covers all
    of ``root`` (build it last, once every other subcommand is there)."""
    parser = subparsers.add_parser(
        "completion",
        help="print a shell completion script (bash, zsh or fish)",
        description="Print a completion script for SHELL on stdout, made from this "
        "command's own options. bash: sessionfs completion bash > "
        "~/.local/share/bash-completion/completions/sessionfs; zsh (in ~/.zshrc, after "
        'compinit): eval "$(sessionfs completion zsh)"; fish: sessionfs completion fish > '
        "~/.config/fish/completions/sessionfs.fish",
    )
    parser.add_argument("shell", choices=SHELLS)

    def run(args: argparse.Namespace) -> int:
        sys.stdout.write(script_for(args.shell, root))
        return 0

    parser.set_defaults(func=run)
