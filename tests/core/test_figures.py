"""The figure check (spurious.core.report.figures) on hand-built figures: each rule fails the figure it describes and
passes its readable counterpart."""

from __future__ import annotations

import pytest
from matplotlib.figure import Figure

from spurious.core.report import figures


def _figure(width: float = 6.0, height: float = 3.0, layout: str | None = "constrained") -> Figure:
    return Figure(figsize=(width, height), layout=layout)


def test_readable_figure_passes():
    fig = _figure()
    ax = fig.subplots()
    ax.plot([0, 1, 2], [1, 2, 3], color="k", label="one")
    ax.plot([0, 1, 2], [3, 2, 1], color="k", linestyle="--", label="two")
    ax.set_title("a title")
    ax.set_xlabel("step")
    figures.count_axis(ax.xaxis)
    fig.legend(loc="outside right upper")
    assert figures.check_figure(fig) == []


def test_too_wide():
    fig = _figure(width=16.5)
    fig.subplots().plot([0, 1], [0, 1])
    assert figures.check_figure(fig) == ["16.5 in wide (2475 px at 150 dpi): more than 16 in"]
    fig.set_size_inches(16.0, 3.0)
    assert figures.check_figure(fig) == []


def test_overlapping_tick_labels_and_rotation():
    fig = _figure(width=4.0)
    ax = fig.subplots()
    ax.bar(range(6), [1] * 6)
    ax.set_xticks(range(6), [f"a long label {i}" for i in range(6)])
    problems = figures.check_figure(fig)
    assert any("'a long label 0' overlaps text 'a long label 1'" in p for p in problems), problems
    # rotated by 90°, the same labels stand side by side: compared as rotated rectangles, they do not overlap
    ax.tick_params(axis="x", labelrotation=90)
    assert figures.check_figure(fig) == []
    # at 45° too: the axis-aligned boxes of neighbouring labels overlap, the rotated rectangles do not
    ax.tick_params(axis="x", labelrotation=45)
    assert figures.check_figure(fig) == []


def test_text_leaving_the_canvas():
    fig = _figure(layout=None)  # constrained layout would shrink the panel to make room
    ax = fig.subplots()
    ax.plot([0, 1], [0, 1])
    ax.text(0.95, 0.5, "a label that runs past the right edge", transform=ax.transAxes)
    assert figures.check_figure(fig) == ["text 'a label that runs past the right edge' leaves the canvas"]


def test_legend_on_a_panel_and_on_a_title():
    fig = _figure()
    left, right = fig.subplots(1, 2)
    for ax, title in ((left, "left"), (right, "right")):
        ax.plot([0, 1], [0, 1], label=title, color="C0" if title == "left" else "C1")
        ax.set_title(title)
    right.legend(loc="upper left")
    problems = figures.check_figure(fig)
    assert problems == ["the legend ['right'] lies on the panel 'right'"]
    right.get_legend().remove()
    # a figure legend placed over the right panel's title
    fig.legend(loc="upper center", bbox_to_anchor=(0.75, 1.0))
    problems = figures.check_figure(fig)
    assert any(p.startswith("the legend ['left', 'right'] overlaps text 'right'") for p in problems), problems


def test_legend_entries_need_distinct_encodings():
    fig = _figure()
    ax = fig.subplots()
    ax.plot([0, 1], [0, 1], color="black", linewidth=1.2, label="the panel's run")
    ax.plot([0, 1], [1, 0], color="black", linewidth=0.8, label="gate mean")
    ax.bar([2], [1], color="C0", label="bars")
    ax.bar([3], [1], color="C0", hatch="//", label="hatched bars")
    fig.legend(loc="outside right upper")
    assert figures.check_figure(fig) == [
        "the legend [\"the panel's run\", 'gate mean', 'bars']: entries \"the panel's run\" and 'gate mean' share "
        "colour, line style and marker"
    ]
    # a lighter (alpha) black is another colour on the page
    ax.get_lines()[1].set_alpha(0.4)
    fig.legends.clear()
    fig.legend(loc="outside right upper")
    assert figures.check_figure(fig) == []


def test_count_axis_ticks():
    fig = _figure()
    ax = fig.subplots()
    ax.plot([1, 2, 3, 4], [3.0, 2.0, 1.5, 1.2])
    ax.set_xlabel("step")
    assert 2.5 in ax.get_xticks()  # matplotlib's default ticks on 1..4
    assert figures.check_figure(fig) == []  # an axis not declared a count may have any ticks
    figures.count_axis(ax.xaxis)
    assert figures.check_figure(fig) == []
    ax.set_xticks([1, 1.5, 2])
    assert figures.check_figure(fig) == ["the count axis 'step' of 'step' has fractional ticks [1.5]"]


def test_empty_panel_must_say_why():
    fig = _figure()
    ax = fig.subplots()
    ax.set_title("gap per feature")
    assert figures.check_figure(fig) == ["the panel 'gap per feature' is empty and says nothing about why"]
    ax.text(0.5, 0.5, "no features measured", transform=ax.transAxes, ha="center")
    assert figures.check_figure(fig) == []


@pytest.mark.parametrize("name", ["$\\x$", "a_b^c", "100$ and \\alpha"])
def test_user_text_is_drawn_literally(name, tmp_path):
    @figures.figure_function
    def named(label: str) -> Figure:
        fig = _figure()
        ax = fig.subplots()
        ax.bar([0], [1], label=label)
        ax.set_xticks([0], [label])
        ax.set_title(label)
        fig.legend(loc="outside right upper")
        figures.save_figure(fig, tmp_path / "f.png", tmp_path / "f.svg")
        return fig

    with figures.capture_figures() as captured:
        fig = named(name)
    assert captured == [fig]
    assert figures.check_figure(fig) == []
    ax = fig.axes[0]
    drawn = [ax.title, ax.get_xticklabels()[0], fig.legends[0].texts[0]]
    for text in drawn:
        assert text.get_text() == name
        assert text._preprocess_math(text.get_text()) == (name, False)  # no mathtext
    assert (tmp_path / "f.png").stat().st_size > 0
    svg = figures.svg_text(fig)
    assert svg.startswith("<svg")


def test_strict_environment_raises(tmp_path, monkeypatch):
    fig = _figure(width=17.0)
    fig.subplots().plot([0, 1], [0, 1])
    monkeypatch.setenv(figures.CHECK_ENV, "1")
    with pytest.raises(figures.FigureCheckError, match="more than 16 in"):
        figures.save_figure(fig, tmp_path / "f.png", tmp_path / "f.svg")
    assert not (tmp_path / "f.png").exists()
    monkeypatch.delenv(figures.CHECK_ENV)
    figures.save_figure(fig, tmp_path / "f.png", tmp_path / "f.svg")
    assert (tmp_path / "f.png").exists() and (tmp_path / "f.svg").exists()


def test_a_reference_line_or_an_empty_container_is_not_data():
    fig = _figure()
    ax = fig.subplots()
    ax.axhline(0.0, color="0.3")
    ax.bar([], [])
    ax.scatter([], [])
    ax.errorbar([], [], yerr=[], fmt="none")
    assert figures.check_figure(fig) == ["the panel #1 is empty and says nothing about why"]
    ax.bar([0.0], [0.0], edgecolor="C0", linewidth=1.0)  # a gap of zero, drawn as a line at zero
    assert figures.check_figure(fig) == []
