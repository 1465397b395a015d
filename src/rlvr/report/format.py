"""How the report writes numbers: intervals, markdown tables, the HTML page."""

from __future__ import annotations

import base64
import re
from pathlib import Path

Cell = tuple[float, float, float]  # estimate, low, high


def fmt(cell: Cell, signed: bool = False) -> str:
    est, lo, hi = cell
    f = "{:+.3f}" if signed else "{:.3f}"
    return f"{f.format(est)} [{f.format(lo)}, {f.format(hi)}]"


def markdown(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])


def csv_cell(v) -> str:
    if v is None:
        return ""
    return f"{v:.6g}" if isinstance(v, float) else str(v)


def slug(title: str) -> str:
    """A heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces to hyphens."""
    kept = "".join(c for c in title.lower() if c.isalnum() or c in " -_")
    return kept.replace(" ", "-")


def html(md: str, out_dir: Path) -> str:
    """A self-contained page: the markdown tables as HTML, each figure inlined
    where the markdown shows it (paths relative to `out_dir`), headings with
    the anchors the contents links to."""
    body, table_rows, caption = [], [], None

    def flush():
        if table_rows:
            cells = [r.strip("|").split("|") for r in table_rows if not set(r) <= set("|-")]
            tag = lambda i: "th" if i == 0 else "td"  # noqa: E731
            body.append("<table>" + "".join(
                "<tr>" + "".join(f"<{tag(i)}>{_inline(c.strip())}</{tag(i)}>" for c in row) + "</tr>"
                for i, row in enumerate(cells)) + "</table>")
            table_rows.clear()

    for line in md.splitlines():
        if line.startswith("|"):
            table_rows.append(line)
            continue
        flush()
        figure = re.fullmatch(r"!\[([^\]]*)\]\(([^)]+)\)", line.strip())
        if line.strip() == f"*{caption}*":  # the markdown's caption line: the figure's own caption shows it
            continue
        if figure:
            caption = figure.group(1)
            data = base64.b64encode((out_dir / figure.group(2)).read_bytes()).decode()
            body.append(f'<figure><img src="data:image/png;base64,{data}" alt="{figure.group(1)}">'
                        f"<figcaption>{figure.group(1)}</figcaption></figure>")
        elif line.startswith("#"):
            level, title = len(line) - len(line.lstrip("#")), line.lstrip("#").strip()
            body.append(f'<h{level} id="{slug(title)}">{title}</h{level}>')
        elif line.startswith("- "):
            body.append(f"<li>{_inline(line[2:])}</li>")
        elif line.strip():
            body.append(f"<p>{_inline(line)}</p>")
    flush()
    style = ("body{font-family:system-ui,sans-serif;line-height:1.45;color:#222;max-width:1200px;margin:2em auto;"
             "padding:0 1.5em}p,li{max-width:75em}h1,h2,h3{line-height:1.2}h2{margin-top:2em;border-bottom:1px "
             "solid #ddd;padding-bottom:.2em}table{border-collapse:collapse;margin:1em 0;font-size:.92em}"
             "td,th{border:1px solid #ccc;padding:4px 8px;text-align:left;vertical-align:top}th{background:#f3f3f3}"
             "tr:nth-child(even) td{background:#fafafa}code{background:#f3f3f3;padding:0 .2em}"
             "figure{margin:1.5em 0}img{max-width:100%}figcaption{color:#555;font-size:.92em;max-width:75em}")
    return f"<!doctype html><html><head><meta charset='utf-8'><title>rlvr results</title><style>{style}</style>" \
           f"</head><body>{''.join(body)}</body></html>\n"


def _inline(text: str) -> str:
    """Bold, code and links of one line of our markdown."""
    text = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", text)
    text = re.sub(r"`([^`]+)`", r"<code>\1</code>", text)
    return re.sub(r"\[([^\]]+)\]\(([^)]+)\)", r'<a href="\2">\1</a>', text)
