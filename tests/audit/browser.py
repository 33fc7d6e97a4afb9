"""The audit page as headless Chromium builds it: the DOM it dumps, read back into tables and texts by element id, and
the layout it computes at a window width (:func:`measure`)."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


def flags(profile: Path) -> list[str]:
    return ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run",
            "--disable-component-update", "--disable-sync", f"--user-data-dir={profile}"]


def dump_dom(page: Path, profile: Path) -> str:
    """The DOM after Chromium has parsed and laid out ``page``."""
    proc = subprocess.run([chromium(), *flags(profile), "--dump-dom", f"file://{page}"], capture_output=True, text=True,
                          timeout=120)
    return proc.stdout


class Page(HTMLParser):
    """Tables by id (a list of rows, each a list of cell texts, the header row first), the text of every element
    with an id, and the SVG count per figure."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self.texts: dict[str, str] = {}
        self.figures: dict[str, int] = {}
        self._tables: list[str | None] = []
        self._cell: list[str] | None = None
        self._open: list[tuple[str, str | None]] = []  # (tag, id) of the open elements that have an id or are text
        self._figure: str | None = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "table":
            self._tables.append(attrs.get("id"))
            if attrs.get("id"):
                self.tables[attrs["id"]] = []
        elif tag == "tr" and self._tables and self._tables[-1]:
            self.tables[self._tables[-1]].append([])
        elif tag in ("td", "th") and self._tables and self._tables[-1]:
            self._cell = []
        if tag == "figure":
            self._figure = attrs.get("id")
            self.figures[self._figure] = 0
        if tag == "svg" and self._figure:
            self.figures[self._figure] += 1
        if attrs.get("id") and tag not in ("table", "svg") and not self._figure:
            self._open.append((tag, attrs["id"]))
            self.texts[attrs["id"]] = ""

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None and self._tables and self._tables[-1]:
            self.tables[self._tables[-1]][-1].append("".join(self._cell).strip())
            self._cell = None
        elif tag == "table" and self._tables:
            self._tables.pop()
        if tag == "figure":
            self._figure = None
        if self._open and self._open[-1][0] == tag:
            self._open.pop()

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)
        for _, element_id in self._open:
            self.texts[element_id] += data

    def rows(self, table_id: str) -> list[dict[str, str]]:
        """A table's body rows as dicts keyed by the header cells."""
        header, *body = self.tables[table_id]
        return [dict(zip(header, row, strict=True)) for row in body]


def parse(dom: str) -> Page:
    page = Page()
    page.feed(dom)
    return page


# Run by Chromium in a copy of the page once it has loaded (images included): the page's and each table box's widths
# and every image's state, written into the DOM that --dump-dom prints.
_MEASURE = """<script>
window.addEventListener("load", () => {
  const d = document.documentElement;
  const box = (e) => ({id: e.id, left: e.getBoundingClientRect().left, right: e.getBoundingClientRect().right,
                       top: e.getBoundingClientRect().top, scrollWidth: e.scrollWidth, clientWidth: e.clientWidth});
  const out = {scrollWidth: d.scrollWidth, clientWidth: d.clientWidth,
    boxes: [...document.querySelectorAll(".table-box")].map(box),
    tables: [...document.querySelectorAll("table")].map((t) => ({id: t.id, box: t.parentElement.className})),
    figures: [...document.querySelectorAll("figure")].map(box),
    images: [...document.images].map((i) => ({figure: i.closest("figure") && i.closest("figure").id, alt: i.alt,
      complete: i.complete, naturalWidth: i.naturalWidth, width: i.getBoundingClientRect().width,
      top: i.getBoundingClientRect().top}))};
  const pre = document.createElement("pre");
  pre.id = "spurious-measure";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>"""


def measure(page: Path, profile: Path, width: int) -> dict:
    """The layout of ``page`` in a window ``width`` CSS pixels wide: the document's ``scrollWidth`` and
    ``clientWidth``, each ``.table-box`` (id, left, right, top, scrollWidth, clientWidth), each table's box class,
    each figure's box and each image (its figure, alt text, whether it loaded, natural and shown width)."""
    probe = profile.parent / f"measure-{width}-{page.name}"  # beside the profile: the page's folder stays as it is
    probe.write_text(page.read_text(encoding="utf-8").replace("</body>", _MEASURE + "</body>"), encoding="utf-8")
    try:
        proc = subprocess.run([chromium(), *flags(profile), f"--window-size={width},1000", "--dump-dom",
                               f"file://{probe}"], capture_output=True, text=True, timeout=120)
    finally:
        probe.unlink()
    found = re.search(r'<pre id="spurious-measure">(.*?)</pre>', proc.stdout, re.S)
    assert found, f"Chromium printed no measurements: {proc.stderr[-2000:]}"
    return json.loads(html.unescape(found.group(1)))
