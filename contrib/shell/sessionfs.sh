# sessionfs shell helpers — source from ~/.bashrc or ~/.zshrc:
#     . /path/to/sessionfs/contrib/shell/sessionfs.sh
# Works in bash and zsh. Each helper is a few lines over the mount; set SESSIONFS_MOUNT
# when the mount is not at ~/agent-sessions. Session arguments are session directories
# (e.g. "$SESSIONFS_MOUNT/recent/1"); without one, the current directory is used.
#
#   sfs_newest                 cd into the most recently active session
#   sfs_branch ENTRY_ID [S]    move the leaf: the next append continues from ENTRY_ID
#   sfs_note TEXT... [-s S]    append TEXT as a user message (durable when it returns)
#   sfs_label NAME [S]         label the current leaf entry
#   sfs_grep PATTERN           list sessions whose transcript matches PATTERN

sfs_root() {
  printf '%s\n' "${SESSIONFS_MOUNT:-$HOME/agent-sessions}"
}

# The session dir to act on: $1 when given, else the current directory.
_sfs_session() {
  local dir=${1:-.}
  if [ ! -e "$dir/ctl" ] || [ ! -d "$dir/entries" ]; then
    echo "sessionfs: $dir is not a session directory of the mount" >&2
    return 2
  fi
  printf '%s\n' "$dir"
}

sfs_newest() {
  cd -P "$(sfs_root)/recent/1" && printf '%s\n' "$(cat title 2>/dev/null)"
}

sfs_branch() {
  [ -n "${1:-}" ] || { echo "usage: sfs_branch ENTRY_ID [SESSION_DIR]" >&2; return 2; }
  local s
  s=$(_sfs_session "${2:-}") || return
  ln -sfn "entries/$1.json" "$s/leaf" && readlink "$s/leaf"
}

sfs_note() {
  local s=. text
  if [ "${1:-}" = "-s" ]; then s=$2; shift 2; fi
  [ $# -gt 0 ] || { echo "usage: sfs_note [-s SESSION_DIR] TEXT..." >&2; return 2; }
  s=$(_sfs_session "$s") || return
  text="$*"
  # The append is fsynced before close returns, so success here means on disk.
  printf '%s\n' "$text" > "$s/append/note-$$.md" && readlink "$s/leaf"
}

sfs_label() {
  [ -n "${1:-}" ] || { echo "usage: sfs_label NAME [SESSION_DIR]" >&2; return 2; }
  local s target
  s=$(_sfs_session "${2:-}") || return
  target=$(readlink "$s/leaf") || { echo "sessionfs: the session has no leaf" >&2; return 1; }
  ln -sfn "../$target" "$s/labels/$1" && readlink "$s/labels/$1"
}

sfs_grep() {
  [ -n "${1:-}" ] || { echo "usage: sfs_grep PATTERN" >&2; return 2; }
  local root
  root=$(sfs_root)
  grep -rl --include=transcript.md -e "$1" "$root/sessions" | sed 's|/transcript\.md$||'
}
