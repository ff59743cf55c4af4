"""sessionfs core: a faithful Python engine for the xcsh/pi agent session format.

Pure Python, synchronous, no FUSE. `import core` gives the public surface of
spec/session-model.md section 12; the submodules hold one job each (see README).
A name is imported from its module when first used (`core.lazy_exports`): a process
that needs only a few of them does not pay for all of core.
"""

from typing import TYPE_CHECKING

from core.lazy_exports import lazy_exports

#: Where each public name lives (the imports below say the same to type checkers;
#: `tests/core/test_public_surface.py` keeps the two and ``__all__`` in step).
MODULES = {
    "core.blobs": ("BLOB_REF_PREFIX", "BlobStore", "parse_blob_ref"),
    "core.context": ("UNSET", "build_session_context", "path_to_root"),
    "core.discovery": (
        "RecentSession",
        "SessionInfo",
        "find_most_recent_session",
        "get_recent_sessions",
        "list_all",
        "list_sessions",
        "read_terminal_breadcrumb",
        "resolve_session",
        "session_info",
        "write_terminal_breadcrumb",
    ),
    "core.errors": ("EntryNotFoundError", "NotASessionError", "PersistenceError"),
    "core.history": ("HistoryStorage",),
    "core.jsonl": (
        "dumps_line",
        "dumps_pretty",
        "is_header",
        "load_entries_from_file",
        "parse_jsonl_lenient",
    ),
    "core.manager": ("SessionManager", "sanitize_session_name"),
    "core.migrate": ("CURRENT_SESSION_VERSION", "migrate_session_entries"),
    "core.paths": ("default_agent_dir", "encode_cwd", "session_dir_for_cwd", "sessions_root"),
    "core.persist": (
        "MAX_PERSIST_CHARS",
        "TRUNCATION_NOTICE",
        "prepare_for_persist",
        "resolve_blob_refs",
    ),
    "core.storage": (
        "FileSessionStorage",
        "MemorySessionStorage",
        "SessionStorage",
        "SessionWriter",
        "StorageStat",
    ),
}

if TYPE_CHECKING:
    from core.blobs import BLOB_REF_PREFIX, BlobStore, parse_blob_ref
    from core.context import UNSET, build_session_context, path_to_root
    from core.discovery import (
        RecentSession,
        SessionInfo,
        find_most_recent_session,
        get_recent_sessions,
        list_all,
        list_sessions,
        read_terminal_breadcrumb,
        resolve_session,
        session_info,
        write_terminal_breadcrumb,
    )
    from core.errors import EntryNotFoundError, NotASessionError, PersistenceError
    from core.history import HistoryStorage
    from core.jsonl import (
        dumps_line,
        dumps_pretty,
        is_header,
        load_entries_from_file,
        parse_jsonl_lenient,
    )
    from core.manager import SessionManager, sanitize_session_name
    from core.migrate import CURRENT_SESSION_VERSION, migrate_session_entries
    from core.paths import (
        default_agent_dir,
        encode_cwd,
        session_dir_for_cwd,
        sessions_root,
    )
    from core.persist import (
        MAX_PERSIST_CHARS,
        TRUNCATION_NOTICE,
        prepare_for_persist,
        resolve_blob_refs,
    )
    from core.storage import (
        FileSessionStorage,
        MemorySessionStorage,
        SessionStorage,
        SessionWriter,
        StorageStat,
    )
else:
    __getattr__, __dir__ = lazy_exports(__name__, MODULES)

__all__ = [
    "BLOB_REF_PREFIX",
    "CURRENT_SESSION_VERSION",
    "MAX_PERSIST_CHARS",
    "TRUNCATION_NOTICE",
    "UNSET",
    "BlobStore",
    "EntryNotFoundError",
    "FileSessionStorage",
    "HistoryStorage",
    "MemorySessionStorage",
    "NotASessionError",
    "PersistenceError",
    "RecentSession",
    "SessionInfo",
    "SessionManager",
    "SessionStorage",
    "SessionWriter",
    "StorageStat",
    "build_session_context",
    "default_agent_dir",
    "dumps_line",
    "dumps_pretty",
    "encode_cwd",
    "find_most_recent_session",
    "get_recent_sessions",
    "is_header",
    "list_all",
    "list_sessions",
    "load_entries_from_file",
    "migrate_session_entries",
    "parse_blob_ref",
    "parse_jsonl_lenient",
    "path_to_root",
    "prepare_for_persist",
    "read_terminal_breadcrumb",
    "resolve_blob_refs",
    "resolve_session",
    "sanitize_session_name",
    "session_dir_for_cwd",
    "session_info",
    "sessions_root",
    "write_terminal_breadcrumb",
]
