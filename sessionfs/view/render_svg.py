"""``tree.svg``: a session's tree as a picture, from its `SessionSource`.

The rows of ``tree.txt`` (`sessionfs.view.render.tree_rows`: depth first, a chain at
one level, each fork's branches one level in) drawn as dots joined to their parents:
the current path filled, the leaf ringed, labels in their colour, each row a link to
its entry's file (a tip's to its branch page, ``branches/<tip>.html``). Light or dark
as the reader's system prefers; no script, nothing fetched.

Bounded whatever the tree: at most `MAX_ROWS` rows are drawn (a note says how many
more there are, and that ``tree.txt`` has them all), the indentation stops at
``tree.txt``'s `TREE_MAX_INDENT`, and each row's text at `TREE_TEXT_CHARS`, so the
picture is at most a few hundred KB. Every string from the session is escaped, and
characters XML cannot hold (control characters, lone surrogates) become U+FFFD, so a
hostile session can neither run anything nor break the picture.
"""

from __future__ import annotations

import html
import re
from typing import Final

from core.formats.base import SessionSource
from sessionfs.view.branch_pages import BRANCHES_DIR, page_name
from sessionfs.view.names import entry_file_names
from sessionfs.view.render import TREE_MAX_INDENT, TREE_TEXT_CHARS, tree_rows
from sessionfs.view.render_html import href

__all__ = ["MAX_ROWS", "tree_svg"]

#: Rows drawn; a bigger tree is cut there, with a note.
MAX_ROWS: Final = 2000
ROW: Final = 22
INDENT: Final = 18
LEFT: Final = 14
#: Roughly how wide a character of the row text is (the picture's width is an estimate).
CHAR_WIDTH: Final = 7.4

STYLE: Final = """\
svg{font:12.5px system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif}
.bg{fill:#f7f7f5}.edge{stroke:#b8c0c8;stroke-width:1.5;fill:none}
.dot{fill:#f7f7f5;stroke:#8c959f;stroke-width:1.5}.on .dot{fill:#2f6fdb;stroke:#2f6fdb}
.ring{fill:none;stroke:#2f6fdb;stroke-width:1.5}.edge.on{stroke:#2f6fdb;stroke-width:2}
text{fill:#57606a}.on text{fill:#1f2328}.id{font-family:ui-monospace,"DejaVu Sans Mono",
monospace;font-size:11.5px}.kind{font-weight:600}.label{fill:#9a6700;font-weight:600}
.note{fill:#9a6700}a:hover text{text-decoration:underline}
@media (prefers-color-scheme:dark){.bg{fill:#0f1216}.edge{stroke:#3d444d}
.dot{fill:#0f1216;stroke:#6e7681}.on .dot{fill:#6ca4ff;stroke:#6ca4ff}
.ring,.edge.on{stroke:#6ca4ff}text{fill:#8d96a0}.on text{fill:#e6edf3}
.label,.note{fill:#d4a72c}}
"""

#: What XML 1.0 cannot hold, even escaped.
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def xml_text(value: object) -> str:
    """Any value as XML text (safe in an attribute too)."""
    text = value if isinstance(value, str) else str(value)
    return html.escape(_NOT_XML.sub("\ufffd", text), quote=True)


def tree_svg(source: SessionSource) -> bytes:
    """The picture (module docstring)."""
    forest = source.forest()
    names = entry_file_names([source.entry_name(i) for i in range(len(source))])
    on_path = set(source.path_indexes())
    leaf = source.leaf_index()
    labels = source.labels()
    where: dict[int, tuple[float, float]] = {}
    rows: list[str] = []
    edges: list[str] = []
    widest = 0.0
    for row, (index, level, _) in enumerate(tree_rows(forest.roots, forest.children.__getitem__)):
        if row == MAX_ROWS:
            break
        x = LEFT + INDENT * min(level, TREE_MAX_INDENT)
        y = ROW * row + ROW / 2 + 8
        where[index] = (x, y)
        parent = forest.parent(index)
        if parent is not None and parent in where:
            px, py = where[parent]
            path = (
                f"M{px:g} {py:g}V{y:g}"
                if px == x
                else f"M{px:g} {py:g}V{y - 6:g}Q{px:g} {y:g} {px + 6:g} {y:g}H{x:g}"
            )
            lit = " on" if index in on_path and parent in on_path else ""
            edges.append(f'<path class="edge{lit}" d="{path}"/>\n')
        text = " ".join(source.entry_text(index).split())[:TREE_TEXT_CHARS]
        label = labels.get(source.entry_name(index)) if labels else None
        tip = not forest.children[index] and parent is not None
        target = (
            href(BRANCHES_DIR, page_name(names[index])) if tip else href("entries", names[index])
        )
        shown = f"{source.entry_tree_name(index)} {source.entry_kind(index)} {text}"
        widest = max(widest, x + 14 + CHAR_WIDTH * (len(shown) + (len(label) + 3 if label else 0)))
        rows.append(
            f'<g class="{"on" if index in on_path else "off"}"><circle class="dot" cx="{x:g}" '
            f'cy="{y:g}" r="4.5"/>'
            + (f'<circle class="ring" cx="{x:g}" cy="{y:g}" r="8"/>' if index == leaf else "")
            + f'<a href="{target}"><text x="{x + 14:g}" y="{y + 4:g}">'
            f'<tspan class="id">{xml_text(source.entry_tree_name(index))}</tspan> '
            f'<tspan class="kind">{xml_text(source.entry_kind(index))}</tspan> '
            f"{xml_text(text)}"
            + (f' <tspan class="label">[{xml_text(label)}]</tspan>' if label else "")
            + "</text></a></g>\n"
        )
    drawn = len(where)
    height = ROW * drawn + 16
    note = ""
    if drawn < len(source):
        more = len(source) - drawn
        note = (
            f'<text class="note" x="{LEFT}" y="{height + 8}">\u2026 {more:,} more entries '
            "not drawn (the picture stops at "
            f"{MAX_ROWS:,} rows): tree.txt has them all</text>\n"
        )
        height += ROW
        widest = max(widest, LEFT + CHAR_WIDTH * 80)
    width = max(240, int(widest) + LEFT)
    title = source.title() or "(untitled session)"
    head = (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}">\n'
        f"<title>{xml_text(title)}</title>\n<style>{STYLE}</style>\n"
        '<rect class="bg" width="100%" height="100%"/>\n'
    )
    body = "".join(edges) + "".join(rows)
    return (head + body + note + "</svg>\n").encode("utf-8", "replace")
