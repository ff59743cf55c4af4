#!/usr/bin/env bash
# Idempotent set-up for a fresh Debian/Ubuntu machine: FUSE 3 (system packages),
# a project venv in .venv, and the package installed editable with its test extra.
# Every step is skipped when already done, so `make run` / `make test` stay fast.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v fusermount3 >/dev/null 2>&1 || need_apt+=(fuse3)
pkg-config --exists fuse3 2>/dev/null || need_apt+=(libfuse3-dev)
command -v pkg-config >/dev/null 2>&1 || need_apt+=(pkg-config)
if [ ${#need_apt[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "bootstrap: installing ${need_apt[*]} (apt)" >&2
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq fuse3 libfuse3-dev pkg-config >/dev/null
fi

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "bootstrap: creating .venv" >&2
  "$PY" -m venv .venv
  .venv/bin/pip install -q --upgrade pip
fi
# Reinstall only when pyproject.toml changed since the last install.
stamp=.venv/.sessionfs-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  echo "bootstrap: installing sessionfs[test] into .venv" >&2
  .venv/bin/pip install -q -e '.[test]'
  touch "$stamp"
fi
