#!/usr/bin/env bash
# Install the sessionfs user unit.
#   contrib/systemd/install.sh [MOUNTPOINT]      (default: ~/agent-sessions)
# Environment: SESSIONFS_BIN (default: `command -v sessionfs`, else this repo's .venv),
#              UNIT_DIR (default: ~/.config/systemd/user),
#              SESSIONFS_STORE=s3://BUCKET[/PREFIX]: also install sessionfs-sync.service,
#              SESSIONFS_SYNC_ARGS: more `sessionfs sync` options (e.g. --endpoint-url URL),
#              SESSIONFS_ARCHIVE_ARGS: options of the archive timer's `sessionfs sync --once`,
#              SESSIONFS_NO_ARCHIVE=1: no archive timer (sessionfs-archive.timer).
# Then: systemctl --user daemon-reload && systemctl --user enable --now sessionfs
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
mountpoint=${1:-$HOME/agent-sessions}
bin=${SESSIONFS_BIN:-$(command -v sessionfs || true)}
[ -n "$bin" ] || bin="$here/../../.venv/bin/sessionfs"
if [ ! -x "$bin" ]; then
  echo "install.sh: no sessionfs executable (set SESSIONFS_BIN or run 'make setup' first)" >&2
  exit 2
fi
bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
unit_dir=${UNIT_DIR:-$HOME/.config/systemd/user}
mkdir -p "$unit_dir"
sed -e "s|@SESSIONFS_BIN@|$bin|g" -e "s|@MOUNTPOINT@|$mountpoint|g" \
  "$here/sessionfs.service.in" > "$unit_dir/sessionfs.service"
echo "installed $unit_dir/sessionfs.service (mount at $mountpoint)"
echo "enable it with: systemctl --user daemon-reload && systemctl --user enable --now sessionfs"

if [ -n "${SESSIONFS_STORE:-}" ]; then
  sed -e "s|@SESSIONFS_BIN@|$bin|g" -e "s|@STORE@|$SESSIONFS_STORE|g" \
    -e "s|@SYNC_ARGS@|${SESSIONFS_SYNC_ARGS:-}|g" \
    "$here/sessionfs-sync.service.in" > "$unit_dir/sessionfs-sync.service"
  echo "installed $unit_dir/sessionfs-sync.service (sync to $SESSIONFS_STORE)"
  echo "enable it with: systemctl --user daemon-reload && systemctl --user enable --now sessionfs-sync"
fi

if [ -z "${SESSIONFS_NO_ARCHIVE:-}" ]; then
  sed -e "s|@SESSIONFS_BIN@|$bin|g" -e "s|@ARCHIVE_ARGS@|${SESSIONFS_ARCHIVE_ARGS:-}|g" \
    "$here/sessionfs-archive.service.in" > "$unit_dir/sessionfs-archive.service"
  cp "$here/sessionfs-archive.timer" "$unit_dir/sessionfs-archive.timer"
  echo "installed $unit_dir/sessionfs-archive.timer (archives every agent's sessions every 15 min)"
  echo "enable it with: systemctl --user daemon-reload && systemctl --user enable --now sessionfs-archive.timer"
fi
