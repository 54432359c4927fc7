"""Results shown next to each other in a notebook (HTML) or one after another (plain text)."""

from __future__ import annotations

import html
from dataclasses import dataclass, field

import pandas as pd


@dataclass
class Panel:
    caption: str
    frame: pd.DataFrame | None = None
    text: str | None = None  # shown instead of a table: an error, or a scalar
    sql: bool = True  # an engine's result: missing values are shown as NULL

    def shown(self) -> pd.DataFrame:
        """The frame as displayed: an engine's missing values read NULL, as in a SQL client."""
        if not self.sql:
            return self.frame
        shown = self.frame.copy()
        for i in range(shown.shape[1]):
            column = shown.iloc[:, i]
            if column.isna().any():
                shown.isetitem(i, column.astype(object).where(column.notna(), "NULL"))
        return shown

    def table_text(self) -> str:
        if len(self.frame) == 0:
            return "(no rows) columns: " + ", ".join(map(str, self.frame.columns))
        return self.shown().to_string(index=False)

    def table_html(self) -> str:
        if len(self.frame) == 0:
            return "<p><i>(no rows)</i> columns: " + html.escape(", ".join(map(str, self.frame.columns))) + "</p>"
        return self.shown().to_html(index=False)


@dataclass
class SideBySide:
    """Several results next to each other (HTML) or one after another (plain text)."""

    panels: list[Panel]
    code: list[tuple[str, str]] = field(default_factory=list)  # (caption, SQL text) shown first
    notes: list[str] = field(default_factory=list)

    def __repr__(self):
        parts = [f"{caption}\n" + textwrap_indent(text) for caption, text in self.code]
        for p in self.panels:
            body = p.text if p.frame is None else p.table_text()
            parts.append(f"{p.caption}\n{textwrap_indent(body)}")
        parts += self.notes
        return "\n".join(parts)

    def _repr_html_(self):
        out = [f"<p><b>{html.escape(c)}</b></p><pre>{html.escape(t)}</pre>" for c, t in self.code]
        cells = []
        for p in self.panels:
            body = f"<pre>{html.escape(p.text or '')}</pre>" if p.frame is None else p.table_html()
            cells.append(f'<div style="margin-right:2em"><p><b>{html.escape(p.caption)}</b></p>{body}</div>')
        out.append('<div style="display:flex;flex-wrap:wrap;align-items:flex-start">' + "".join(cells) + "</div>")
        out += [f"<p>{html.escape(n)}</p>" for n in self.notes]
        return "\n".join(out)


def textwrap_indent(text: str) -> str:
    return "\n".join("    " + line for line in str(text).splitlines())
