"""How the report writes numbers: intervals, markdown tables, the HTML page."""

from __future__ import annotations

import base64
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


def html(md: str, figures: list[Path]) -> str:
    """A self-contained page: the markdown tables as HTML, figures inlined."""
    body, table_rows = [], []

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
        if line.startswith("!["):
            continue
        if line.startswith("#"):
            level = len(line) - len(line.lstrip("#"))
            body.append(f"<h{level}>{line.lstrip('#').strip()}</h{level}>")
        elif line.startswith("- "):
            body.append(f"<li>{line[2:]}</li>")
        elif line.strip():
            body.append(f"<p>{line}</p>")
    flush()
    for f in figures:
        data = base64.b64encode(Path(f).read_bytes()).decode()
        body.append(f'<figure><img src="data:image/png;base64,{data}" alt="{f.stem}"><figcaption>{f.stem}'
                    "</figcaption></figure>")
    style = ("body{font-family:sans-serif;max-width:1300px;margin:2em auto}table{border-collapse:collapse;"
             "margin:1em 0}td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}img{max-width:100%}")
    return f"<!doctype html><html><head><meta charset='utf-8'><title>rlvr results</title><style>{style}</style>" \
           f"</head><body>{''.join(body)}</body></html>\n"


def _inline(text: str) -> str:
    return f"<b>{text[2:-2]}</b>" if text.startswith("**") and text.endswith("**") else text
