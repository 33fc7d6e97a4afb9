"""results/index.html's page (spurious.workflow.results_index) on hand-made folders; the workflow's index rule is tested
on the tiny run (tests/core/test_workflow.py)."""

from __future__ import annotations

from spurious.workflow.results_index import index_html, rst_caption, write_index
from tests.conftest import REPO


def test_captions_are_escaped_with_literals_and_rst_escapes():
    caption = rst_caption((REPO / "report" / "lexical_figure2.rst").read_text())
    assert caption.startswith("Figure 2 (§5.1): label balance (mean over labels of |q(y | F_j=1) − q(y)|) of each")
    assert rst_caption("types in at least ``min_count`` instances; h <= t") == (
        "types in at least <code>min_count</code> instances; h &lt;= t")


def test_only_written_files_are_listed_by_paper_with_paths_relative_to_the_index(tmp_path):
    results = tmp_path / "results"
    (results / "report" / "lexical").mkdir(parents=True)
    (results / "audit" / "mine").mkdir(parents=True)
    for name in ("report/lexical/figure2.png", "report/lexical/figure2.svg", "report/lexical/table1.csv",
                 "report-lexical.html", "audit/mine/report.html"):
        (results / name).write_text("x")
    entries = [
        {"path": str(results / "report/lexical/table1.csv"), "caption": "Table 1.", "paper": "Stubborn",
         "siblings": [str(results / "report/lexical/table1.md")]},  # its Markdown is missing: no MD link
        {"path": str(results / "report/lexical/figure2.png"), "caption": "Figure 2.", "paper": "Stubborn",
         "siblings": [str(results / "report/lexical/figure2.svg")]},
        {"path": str(results / "report/figure2.png"), "caption": "Think Twice Figure 2.", "paper": "Think Twice",
         "siblings": []},  # not written: not listed, and no section for its paper
    ]
    reports = [results / "report-lexical.html", results / "report.html", results / "audit/mine/report.html"]
    page = index_html(entries, reports, results)
    assert "Think Twice" not in page and page.count("<section>") == 1
    assert page.index("Figure 2.") < page.index("Table 1.")  # figures first
    assert '<img src="report/lexical/figure2.png" alt="report/lexical/figure2.png: Figure 2."' in page
    assert 'href="report/lexical/figure2.svg"' in page and 'href="report/lexical/table1.md"' not in page
    assert 'href="report-lexical.html"' in page and 'href="audit/mine/report.html"' in page
    assert 'href="report.html"' not in page and "(spurious audit mine)" in page
    assert write_index(entries, reports, results / "index.html") == 2
    assert (results / "index.html").read_text(encoding="utf-8") == page
