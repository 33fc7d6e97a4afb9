"""``results/index.html``: one page that lists every table and figure the workflow has written into a results
folder, by paper, each with its caption (the ``.rst`` the rule gives ``report()``), its files and, for a figure, a
thumbnail, and that links the HTML reports (``snakemake --report`` pages and the audit pages).

The workflow's ``index`` rule (``rules/index.smk``) hands :func:`write_index` every table and figure the rules
declare for a report, whatever the config, and the page lists those present on disk: one ``results/`` folder holds
what several configs wrote (``make demo`` and ``make demo-lexical``), and the index shows all of it. Paths in the page
are relative to the results folder, so the folder can be moved or shared as a whole.
"""

from __future__ import annotations

import html
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from spurious.core.io import atomic_path

FIGURE_SUFFIXES = (".png", ".svg")

STYLE = """
body { font-family: system-ui, sans-serif; max-width: 72rem; margin: 2rem auto; padding: 0 1rem; color: #222; }
.entry { display: flex; gap: 1rem; align-items: flex-start; border-top: 1px solid #ddd; padding: 0.8rem 0; }
.entry > a { flex: 0 0 16rem; max-width: 40%; }
.entry img { width: 100%; height: auto; border: 1px solid #ccc; background: white; }
.entry p { margin: 0.3rem 0; } .files a { margin-right: 0.8rem; }
.caption { color: #333; font-size: 0.92rem; } code { font-size: 0.9em; }
footer.provenance { border-top: 2px solid #ccc; margin-top: 2rem; font-size: 0.85rem; color: #444; }
"""


def rst_caption(text: str) -> str:
    """A report caption (reStructuredText, as the captions in ``report/`` use it) as HTML: escaped, ````literal````
    as code, rst's backslash escapes (``\\|``) removed."""
    out = html.escape(" ".join(text.split()))
    out = re.sub(r"``(.+?)``", r"<code>\1</code>", out)
    return re.sub(r"\\(.)", r"\1", out)


def _relative(path: Path, root: Path) -> str:
    return Path(os.path.relpath(path, root)).as_posix()


def _link(path: Path, root: Path) -> str:
    rel = html.escape(_relative(path, root), quote=True)
    return f'<a href="{rel}">{html.escape(path.suffix.lstrip(".").upper())}</a>'


def _kind(page: Path, root: Path) -> str:
    parts = Path(_relative(page, root)).parts
    if len(parts) == 3 and parts[0] == "audit":
        return f"spurious audit {html.escape(parts[1])}"
    return "Snakemake report: every result with its provenance"


def _entry(entry: Mapping[str, Any], root: Path) -> str:
    path = Path(entry["path"])
    files = [path] + [Path(p) for p in entry.get("siblings", ()) if Path(p).is_file()]
    links = " ".join(_link(f, root) for f in sorted(files, key=lambda f: f.suffix))
    name = html.escape(_relative(path.with_suffix(""), root))
    href = html.escape(_relative(path, root), quote=True)
    thumb = ""
    if path.suffix in FIGURE_SUFFIXES:
        alt = html.escape(f"{_relative(path, root)}: {' '.join(entry['caption'].split())}", quote=True)
        thumb = f'<a href="{href}"><img src="{href}" alt="{alt}" loading="lazy"></a>'
    return (f'<div class="entry" id="{href}">{thumb}<div>'
            f"<p><strong>{name}</strong> <span class='files'>{links}</span></p>"
            f"<p class='caption'>{rst_caption(entry['caption'])}</p></div></div>")


def index_html(entries: Sequence[Mapping[str, Any]], reports: Iterable[str | os.PathLike], root: str | os.PathLike,
               *, title: str = "spurious: results", footer: str = "") -> str:
    """The page. ``entries``: one per table or figure (``path``, ``caption`` text, ``paper``, and the ``siblings``
    written with it: the Markdown beside a CSV, the SVG beside a PNG), listed when ``path`` exists, by
    paper in the order given, figures first; ``reports``: HTML pages to link (those that exist); ``footer``: HTML
    at the end (the provenance, ``spurious.core.provenance.footer_html``)."""
    root = Path(root)
    present = [e for e in entries if Path(e["path"]).is_file()]
    parts = [f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
             "<meta name='viewport' content='width=device-width, initial-scale=1'>"
             f"<title>{html.escape(title)}</title><style>{STYLE}</style></head><body><h1>{html.escape(title)}</h1>"]
    pages = [Path(p) for p in reports if Path(p).is_file()]
    parts.append("<h2 id='reports'>Reports</h2>")
    if pages:
        parts.append("<ul>" + "".join(f'<li><a href="{html.escape(_relative(p, root), quote=True)}">'
                                      f"{html.escape(_relative(p, root))}</a> ({_kind(p, root)})</li>"
                                      for p in pages) + "</ul>")
    else:
        parts.append("<p>No HTML report yet: <code>make report</code> (or <code>snakemake --report "
                     "results/report.html</code>) writes one.</p>")
    papers: dict[str, list[Mapping[str, Any]]] = {}
    for e in present:
        papers.setdefault(e["paper"], []).append(e)
    if not papers:
        parts.append("<p>No table or figure has been written yet.</p>")
    for paper, items in papers.items():
        figures = [e for e in items if Path(e["path"]).suffix in FIGURE_SUFFIXES]
        tables = [e for e in items if e not in figures]
        parts.append(f"<section><h2>{html.escape(paper)}</h2>")
        for heading, group in (("Figures", figures), ("Tables", tables)):
            if group:
                parts.append(f"<h3>{heading}</h3>" + "".join(_entry(e, root) for e in group))
        parts.append("</section>")
    parts.append(footer)
    parts.append("</body></html>")
    return "\n".join(parts)


def write_index(entries: Sequence[Mapping[str, Any]], reports: Iterable[str | os.PathLike],
                out: str | os.PathLike, *, footer: str = "") -> int:
    """Write :func:`index_html` to ``out`` (atomically; paths relative to its folder); returns the number of tables
    and figures listed."""
    out = Path(out)
    page = index_html(entries, reports, out.parent, footer=footer)
    with atomic_path(out) as tmp:
        tmp.write_text(page, encoding="utf-8")
    return sum(Path(e["path"]).is_file() for e in entries)
