"""Building blocks of a self-contained HTML page: inline CSS, escaped tables, code diffs, figures."""

from __future__ import annotations

import difflib
import html
import math
import re
from collections.abc import Iterable, Sequence
from typing import Any

from matplotlib.figure import Figure

from .plot import svg_text

CSS = """
*{box-sizing:border-box}
body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:0 auto;max-width:1180px;
padding:24px;color:#222;overflow-wrap:break-word}
h1{font-size:1.5em;margin-bottom:0.2em}
h2{font-size:1.15em;border-bottom:2px solid #1b6ca8;padding-bottom:3px;margin-top:1.8em}
.sub{color:#666;margin-top:0}
table{border-collapse:collapse;margin:8px 0;font-size:0.9em}
th,td{padding:3px 10px;border-bottom:1px solid #e3e3e3;text-align:left;vertical-align:top}
th{background:#f3f6f9}td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
td.long{overflow-wrap:anywhere;min-width:8em}
.kv th{width:210px}
pre{background:#f7f7f7;border:1px solid #e3e3e3;padding:8px;overflow-x:auto;font-size:0.82em;line-height:1.35}
.diff .add{background:#e6ffec;color:#116329;display:block}
.diff .del{background:#ffebe9;color:#82071e;display:block}
.diff .hunk{color:#8250df;display:block}.diff .ctx{display:block}
figure{margin:10px 0;min-width:0}figure svg,img{max-width:100%;height:auto}
.figs{display:grid;grid-template-columns:repeat(auto-fit,minmax(min(520px,100%),1fr));gap:12px}
.note{color:#8a5a00;background:#fff8e1;padding:4px 8px;border-left:3px solid #f0b400}
code{font-size:0.9em}.wrap{overflow-x:auto;max-width:100%}
@media (max-width:700px){body{padding:8px}th,td{padding:2px 5px}.kv th{width:auto}}
"""
# Long unbroken cells (run ids, identities, hashes, JSON) may break anywhere, so a table shrinks to
# the page; numbers never break. A table that still cannot fit scrolls inside its own box (.wrap).
_NUMBER = re.compile(r"[-+]?(\d[\d.]*(e[-+]?\d+)?|–|-)(\s*±\s*[-+]?(\d[\d.]*(e[-+]?\d+)?|–))?|\d+/\d+")
_LONG_WORD = 24
"""A string cell with a word this long may break inside it (``td.long``)."""


def _cell_class(v: Any) -> str:
    if isinstance(v, int | float) and not isinstance(v, bool):
        return " class='num'"
    text = str(v) if v is not None else ""
    if _NUMBER.fullmatch(text.strip()):
        return " class='num'"
    if any(len(w) >= _LONG_WORD for w in text.split()):
        return " class='long'"
    return ""


def esc(x: Any) -> str:
    """HTML-escape anything, rendering None / NaN as an en dash."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    if isinstance(x, float):
        return html.escape(f"{x:.6g}")
    return html.escape(str(x))


def table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """An HTML table; numeric cells are right-aligned and never broken, long words may break."""
    head = "".join(f"<th>{esc(h)}</th>" for h in header)
    body = []
    for row in rows:
        cells = "".join(f"<td{_cell_class(v)}>{esc(v)}</td>" for v in row)
        body.append(f"<tr>{cells}</tr>")
    return (
        f"<div class='wrap'><table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table></div>"
    )


def kv_table(pairs: Iterable[tuple[str, Any]]) -> str:
    """A two-column key / value table."""
    rows = "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in pairs)
    return f"<div class='wrap'><table class='kv'><tbody>{rows}</tbody></table></div>"


def figure(fig: Figure, caption: str = "") -> str:
    """A figure inlined as SVG with an optional caption."""
    cap = f"<figcaption>{esc(caption)}</figcaption>" if caption else ""
    return f"<figure>{svg_text(fig)}{cap}</figure>"


def diff_block(old: str, new: str, old_name: str, new_name: str, context: int = 3) -> str:
    """A coloured unified diff of two program texts (or a note when they are identical)."""
    lines = list(
        difflib.unified_diff(
            old.splitlines(), new.splitlines(), fromfile=old_name, tofile=new_name, n=context, lineterm=""
        )
    )
    if not lines:
        return "<p class='note'>The best program is identical to the initial program.</p>"
    out = []
    for ln in lines:
        cls = (
            "hunk"
            if ln.startswith(("@@", "--- ", "+++ "))
            else "add"
            if ln.startswith("+")
            else "del"
            if ln.startswith("-")
            else "ctx"
        )
        out.append(f"<span class='{cls}'>{html.escape(ln) or ' '}</span>")
    return "<pre class='diff'>" + "".join(out) + "</pre>"


def figures(blocks: Iterable[str]) -> str:
    """Several figures side by side (wrapping on narrow screens)."""
    return "<div class='figs'>" + "".join(blocks) + "</div>"


def page(title: str, subtitle: str, sections: Iterable[tuple[str, str]]) -> str:
    """A complete HTML document (inline CSS; nothing is fetched from elsewhere)."""
    body = "".join(f"<h2>{esc(h)}</h2>{content}" for h, content in sections)
    return (
        "<!doctype html>\n<html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        "<meta http-equiv='Content-Security-Policy' "
        "content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\">"
        f"<title>{esc(title)}</title><style>{CSS}</style></head><body>"
        f"<h1>{esc(title)}</h1><p class='sub'>{esc(subtitle)}</p>{body}</body></html>\n"
    )
