#!/usr/bin/env bash
# The README's main job (`make run`): mount the agent dir at MOUNTPOINT in the
# background and say what to try. Mounts the user's agent dir (found by the agents' own
# rules) when it has sessions; otherwise generates a demo agent dir once, with the core
# engine (contrib/demo.py), under the platformdirs user data dir, and mounts that.
# Claude Code's and Codex's sessions ($CLAUDE_CONFIG_DIR or ~/.claude, $CODEX_HOME or
# ~/.codex) show read-only under agents/; with the demo agent dir, an agent that has no
# dir of its own gets a small demo tree (contrib/demo_agents.py) so agents/ is there.
set -euo pipefail
cd "$(dirname "$0")/.."

MOUNTPOINT=${1:-$PWD/mnt}
PY=.venv/bin/python

# The agents' own rules (PI_CODING_AGENT_DIR, PI_CONFIG_DIR, ~/.xcsh/agent, else oh-my-pi's
# ~/.omp/agent or its OMP_PROFILE dir, $XDG_DATA_HOME/xcsh or /omp), from core.
agent_dir=$("$PY" -c 'from core import paths; print(paths.default_agent_dir())')
sessions_dir=$("$PY" -c 'from core import paths; print(paths.sessions_root())')
agent_name=$("$PY" -c 'import sys; from core import paths; print(paths.agent_name(sys.argv[1]))' "$agent_dir")
what="your ${agent_name:+$agent_name }agent dir"
if [ ! -d "$sessions_dir" ]; then
  data_dir=$("$PY" -c 'import platformdirs; print(platformdirs.user_data_dir("sessionfs"))')
  agent_dir="$data_dir/demo-agent"
  what="a demo agent dir (no sessions at $sessions_dir)"
  if [ ! -d "$agent_dir/sessions" ]; then
    echo "run: generating a demo agent dir in $agent_dir" >&2
    "$PY" contrib/demo.py "$agent_dir" >/dev/null
  fi
fi

agent_args=()
if [ -n "${data_dir:-}" ]; then
  for agent in claude codex; do
    home=$("$PY" -c "from core.agent_homes import agent_home; print(agent_home('$agent'))")
    if [ ! -d "$home" ]; then
      if [ ! -d "$data_dir/demo-claude" ] || [ ! -d "$data_dir/demo-codex" ]; then
        echo "run: generating demo Claude Code and Codex dirs in $data_dir" >&2
        rm -rf "$data_dir/demo-claude" "$data_dir/demo-codex"
        "$PY" contrib/demo_agents.py "$data_dir/demo-claude" "$data_dir/demo-codex" >/dev/null
      fi
      agent_args+=("--$agent-dir" "$data_dir/demo-$agent")
    fi
  done
fi

mkdir -p "$MOUNTPOINT"
if mountpoint -q "$MOUNTPOINT" 2>/dev/null; then
  echo "run: $MOUNTPOINT is already mounted; unmount it with: $PWD/$PY -m sessionfs umount $MOUNTPOINT" >&2
  exit 1
fi

"$PY" -m sessionfs mount "$MOUNTPOINT" --agent-dir "$agent_dir" "${agent_args[@]}"

cat <<EOT
sessionfs: mounted $what
  $agent_dir
at
  $MOUNTPOINT

Try:
  ls $MOUNTPOINT/sessions/*/            # one directory per session
  ls -l $MOUNTPOINT/recent/             # newest sessions first
  cat $MOUNTPOINT/recent/1/transcript.md
  cat $MOUNTPOINT/recent/1/tree.txt     # '*' marks the current path
  readlink $MOUNTPOINT/recent/1/leaf
  grep -rl middleware $MOUNTPOINT/transcripts/   # every conversation, one file each
  cat "$MOUNTPOINT/search/redirect loop"          # full-text search, newest first
  cat $MOUNTPOINT/history/recent.txt
  ls $MOUNTPOINT/agents/*/sessions/*/   # Claude Code and Codex sessions, read-only
  grep -rl middleware $MOUNTPOINT/agents/*/transcripts/
  cat $MOUNTPOINT/README.md             # the manual of the mount

Unmount with:
  $PWD/$PY -m sessionfs umount $MOUNTPOINT
EOT
