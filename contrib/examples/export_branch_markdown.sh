#!/usr/bin/env bash
# Export a session's current branch to a Markdown file.
#   contrib/examples/export_branch_markdown.sh SESSION_DIR [OUT.md]
# The mount already renders the branch as transcript.md; this adds a title block with
# the session id, working dir and leaf, so the export stands on its own.
set -euo pipefail
session=${1:?usage: export_branch_markdown.sh SESSION_DIR [OUT.md]}
out=${2:-/dev/stdout}
[ -f "$session/transcript.md" ] || { echo "not a session directory: $session" >&2; exit 2; }
title=$(cat "$session/title")
header=$(cat "$session/header.json")
field() { printf '%s' "$header" | python3 -c "import json,sys; print(json.load(sys.stdin).get('$1') or '')"; }
{
  printf '# %s\n\n' "${title:-$(field id)}"
  printf -- '- session: `%s`\n- cwd: `%s`\n- leaf: `%s`\n\n' \
    "$(field id)" "$(field cwd)" "$(readlink "$session/leaf" 2>/dev/null || echo none)"
  cat "$session/transcript.md"
} > "$out"
