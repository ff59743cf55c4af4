"""What a session looks like: the agent dir's listings (`agent_index`), one loaded
session and its renderings (`loaded_session`, `render`), the loaded-session cache and
its freshness (`session_cache`), name encoding (`names`), the prompt history
(`history`), and what a refused write carries (`refusal`).

May import: `core` only (never pyfuse3, never `sessionfs.writes`/`fs`/`commands`).
"""
