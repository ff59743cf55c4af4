"""A package's public names, imported from their modules at first use (PEP 562).

``import core`` used to import every module the names come from, which is most of
core (and the search index's SQLite code): ~60 ms of CPU for every process that only
needs a few of them, such as a render worker the first ``grep -r`` waits for. A
package lists its modules and the names each gives, and installs `lazy_exports`' ``__getattr__`` and
``__dir__``; ``from core import X`` and ``core.X`` then import X's module when first
asked, and keep X on the package for the next time. Type checkers read the package's
``if TYPE_CHECKING:`` imports instead (the package installs these functions only at
run time, so a misspelt name is still a type error).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, modules: Mapping[str, tuple[str, ...]]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package`` whose public names are those
    ``modules`` maps each module (its full name) to."""
    homes = {name: module for module, names in modules.items() for name in names}

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:  # (``from package import submodule`` then imports it)
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home), name)
        setattr(sys.modules[package], name, value)  # found directly from now on
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *homes})

    return __getattr__, __dir__
