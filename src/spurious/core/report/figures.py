"""Every figure the project draws: the registry of figure functions, the shared style that draws user text
literally, the shared saver, and the readability check the tests run on every registered figure.

A *figure function* draws one matplotlib ``Figure`` and writes it (PNG and SVG through :func:`save_figure`, or an
inline SVG string through :func:`svg_text`). Decorate it with :func:`figure_function`: that registers it (the tests
draw every registered function on their fixtures and fail on a function that creates a figure without being
registered) and runs it under :func:`figure_style`, in which text is never parsed as mathtext, so that a name such
as ``$\\x$`` or ``a_b^c`` from data, a config or an argument is drawn as written.

:func:`check_figure` lists what makes a figure hard to read at page width (empty: readable):

- wider than :data:`MAX_WIDTH_IN` inches (2,400 px at 150 dpi);
- a drawn text (title, axis label, tick label, annotation, text, legend text) overlapping another drawn text
  (rotated texts compared as rotated rectangles) or leaving the canvas;
- a legend overlapping a panel, another legend or a text that is not its own, or leaving the canvas;
- two entries of one legend that share colour (as seen: alpha over white), line style and marker (or, for patches,
  face colour and hatch);
- an axis declared a count (:func:`count_axis`: steps, iterations, examples) with a fractional tick;
- a visible panel with nothing drawn in it and no text saying why.

With the environment variable :data:`CHECK_ENV` set to ``1`` (the workflow tests set it), :func:`save_figure` and
:func:`svg_text` raise :class:`FigureCheckError` instead of writing an unreadable figure. Otherwise the check does
not run outside the tests: a layout problem never fails a user's run.

matplotlib is imported only inside the functions, so that importing this module stays cheap.
"""

from __future__ import annotations

import contextlib
import functools
import io
import math
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from spurious.core.io import atomic_paths

#: The widest figure a page or slide holds at a readable font size: 16 in = 2,400 px at 150 dpi.
MAX_WIDTH_IN = 16.0
#: The resolution of every PNG the project writes.
PNG_DPI = 150
#: Set to "1" to make :func:`save_figure` / :func:`svg_text` raise on a figure that fails :func:`check_figure`.
CHECK_ENV = "SPURIOUS_CHECK_FIGURES"
#: The rc settings every figure function draws under: user text is text (no mathtext, no TeX).
TEXT_STYLE: dict[str, Any] = {"text.parse_math": False, "text.usetex": False}

# Pixels two boxes may share (anti-aliased glyph edges touch) before they count as overlapping.
_TOLERANCE_PX = 1.0
_COUNT_ATTR = "_spurious_counts"

F = TypeVar("F", bound=Callable[..., Any])

_REGISTRY: dict[str, Callable[..., Any]] = {}
_DRAW_LOCK = threading.Lock()
_CAPTURES: list[tuple[list[Any], bool]] = []


class FigureCheckError(ValueError):
    """A figure failed :func:`check_figure`; the message lists every problem."""


# ----------------------------------------------------------------------------------------------------------------------
# registry and style


def figure_function(fn: F) -> F:
    """Register ``fn`` as a figure function (name: ``module.qualname``) and run it under :func:`figure_style`.

    The name is unique by construction; a module imported again (``importlib.reload``) replaces its entries."""
    name = f"{fn.__module__}.{fn.__qualname__}"

    @functools.wraps(fn)
    def styled(*args: Any, **kwargs: Any) -> Any:
        with figure_style():
            return fn(*args, **kwargs)

    _REGISTRY[name] = styled
    return styled  # type: ignore[return-value]


def registered_figures() -> dict[str, Callable[..., Any]]:
    """name (``module.qualname``) → the registered (styled) figure function, for the modules imported so far."""
    return dict(_REGISTRY)


@contextlib.contextmanager
def figure_style() -> Iterator[None]:
    """The rc context of :data:`TEXT_STYLE`: ``$``, ``_``, ``^`` and ``\\`` in any text are drawn as written."""
    import matplotlib

    with matplotlib.rc_context(TEXT_STYLE):
        yield


def count_axis(axis: Any) -> Any:
    """Declare that ``axis`` (an ``Axes.xaxis`` / ``yaxis``) counts (steps, iterations, examples): whole ticks only.
    Sets ``MaxNLocator(integer=True, min_n_ticks=1)`` (one whole tick rather than fractional ones on a short range)
    and marks the axis, so that :func:`check_figure` fails a fractional tick (e.g. one set later by ``set_xticks``).
    Returns the axis."""
    from matplotlib.ticker import MaxNLocator

    axis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))
    setattr(axis, _COUNT_ATTR, True)
    return axis


def is_count_axis(axis: Any) -> bool:
    return bool(getattr(axis, _COUNT_ATTR, False))


# ----------------------------------------------------------------------------------------------------------------------
# drawing helpers the figure functions share


def fill(text: str, width_in: float, fontsize: float) -> str:
    """``text`` wrapped (``textwrap.fill``) to lines that fit ``width_in`` inches at ``fontsize`` points (a glyph of
    DejaVu Sans, matplotlib's font, is taken as 0.6 em wide: a little more than its average)."""
    import textwrap

    return textwrap.fill(text, width=max(12, int(width_in * 72 / (0.6 * fontsize))), break_on_hyphens=False)


def explain_empty(ax: Any, reason: str, *, fontsize: float = 7.0) -> Any:
    """Say on the panel ``ax``, in words, why it shows nothing (centred, wrapped to the panel's width), and take its
    ticks away (an empty 0-1 axis would read as data); returns the Text. A panel with no data must carry one
    (:func:`check_figure`)."""
    ax.set_xticks([])
    ax.set_yticks([])
    width_in = ax.get_position().width * ax.figure.get_size_inches()[0]
    return ax.text(0.5, 0.5, fill(reason, 0.9 * width_in, fontsize), transform=ax.transAxes, ha="center",
                   va="center", fontsize=fontsize, color="0.25")


def rotate_crowded_ticklabels(axes: Any, *, rotation: float = 90.0, pad_px: float = 2.0) -> list[bool]:
    """Rotate the x tick labels of each of ``axes`` by ``rotation`` only where, drawn horizontally, two neighbours
    would touch (closer than ``pad_px``); the others stay horizontal. Draws the figure once to measure the labels.
    Returns, per axes, whether it was rotated."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    axes = list(axes)
    if not axes:
        return []
    fig = axes[0].figure
    if not isinstance(fig.canvas, FigureCanvasAgg):
        FigureCanvasAgg(fig)
    with figure_style():
        fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    rotated = []
    for ax in axes:
        lo, hi = sorted(ax.get_xlim())
        labels = [t for t, x in zip(ax.get_xticklabels(), ax.get_xticks(), strict=False)
                  if t.get_visible() and t.get_text().strip() and lo <= x <= hi]
        boxes = sorted((t.get_window_extent(renderer) for t in labels), key=lambda b: b.x0)
        crowded = any(a.x1 + pad_px > b.x0 for a, b in zip(boxes, boxes[1:], strict=False))
        if crowded:
            ax.tick_params(axis="x", labelrotation=rotation)
            if abs(rotation) % 180 != 90:  # slanted: the label's end under its tick
                for t in ax.get_xticklabels():
                    t.set_horizontalalignment("right")
                    t.set_rotation_mode("anchor")
        rotated.append(crowded)
    return rotated


# ----------------------------------------------------------------------------------------------------------------------
# writing


@contextlib.contextmanager
def capture_figures(*, write: bool = True) -> Iterator[list[Any]]:
    """Collect every figure :func:`save_figure` or :func:`svg_text` is given inside the block (for the tests, which
    check the figure objects a figure function drew). ``write=False``: write no file (and :func:`svg_text` returns
    "") inside the block, for tests of the layout alone (saving takes most of a figure's time)."""
    captured: list[Any] = []
    entry = (captured, write)
    _CAPTURES.append(entry)
    try:
        yield captured
    finally:
        _CAPTURES[:] = [e for e in _CAPTURES if e is not entry]


def _before_writing(fig: Any) -> bool:
    """Hand ``fig`` to the active captures and, with :data:`CHECK_ENV` set, check it; whether to write it."""
    for captured, _ in _CAPTURES:
        captured.append(fig)
    if os.environ.get(CHECK_ENV) == "1":
        assert_readable(fig)
    return all(write for _, write in _CAPTURES)


def save_figure(fig: Any, png_path: str | os.PathLike, svg_path: str | os.PathLike) -> None:
    """Write ``fig`` as PNG (:data:`PNG_DPI`) and SVG, the two together (:func:`~spurious.core.io.atomic_paths`: a
    failure leaves both previous files, never a new PNG beside an old SVG), without the dates and software versions
    that would make the bytes differ between runs (set ``svg.hashsalt`` in the figure's rc context for stable SVG
    ids)."""
    if not _before_writing(fig):
        return
    with figure_style(), atomic_paths(Path(png_path), Path(svg_path)) as (png_tmp, svg_tmp):
        fig.savefig(png_tmp, format="png", dpi=PNG_DPI, metadata={"Software": None})
        fig.savefig(svg_tmp, format="svg", metadata={"Date": None, "Creator": None})


def svg_text(fig: Any) -> str:
    """``fig`` as an inline ``<svg>`` element (for an HTML page), without the XML prologue."""
    if not _before_writing(fig):
        return ""
    buffer = io.StringIO()
    with figure_style():
        fig.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None})
    text = buffer.getvalue()
    return text[text.index("<svg") :]


# ----------------------------------------------------------------------------------------------------------------------
# the check


def assert_readable(fig: Any) -> None:
    """Raise :class:`FigureCheckError` listing the problems of :func:`check_figure`, if any."""
    problems = check_figure(fig)
    if problems:
        title = _figure_title(fig)
        raise FigureCheckError(f"figure {title!r} is hard to read:\n- " + "\n- ".join(problems))


def check_figure(fig: Any) -> list[str]:
    """What makes ``fig`` hard to read at page width, one line each (see the module docstring); [] = readable.

    Draws the figure (with the Agg renderer, under :func:`figure_style`) and compares the drawn artists' window
    extents."""
    problems: list[str] = []
    width = float(fig.get_size_inches()[0])
    if width > MAX_WIDTH_IN + 1e-9:
        problems.append(
            f"{width:.1f} in wide ({width * PNG_DPI:.0f} px at {PNG_DPI} dpi): more than {MAX_WIDTH_IN:g} in"
        )
    renderer, texts = _draw_recording_texts(fig)
    canvas = fig.bbox
    shapes = [(t, _text_polygon(t, renderer)) for t in texts if t.get_text().strip()]
    shapes = [(t, p) for t, p in shapes if p is not None]
    for t, poly in shapes:
        if not _inside(poly, canvas):
            problems.append(f"text {_describe(t)} leaves the canvas")
    for i, (a, pa) in enumerate(shapes):
        for b, pb in shapes[i + 1 :]:
            if _polygons_overlap(pa, pb):
                problems.append(f"text {_describe(a)} overlaps text {_describe(b)}")
    problems += _legend_problems(fig, renderer, shapes)
    problems += _count_axis_problems(fig)
    problems += _empty_panel_problems(fig, texts)
    return problems


def _draw_recording_texts(fig: Any) -> tuple[Any, list[Any]]:
    """Draw ``fig`` and return (renderer, the Text artists actually drawn, in drawing order).

    ``Text.draw`` is wrapped for the one draw (under a lock; matplotlib's drawing is not thread-safe anyway) and
    records each text it is called on that it draws (visible, not empty): ticks outside the view, annotations whose
    point is outside their axes and artists of invisible parents are left out as the renderer leaves them out. (The
    renderer's ``draw_text`` would not do: it is not told the artist of a text of several lines.)"""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.text import Text

    if not isinstance(fig.canvas, FigureCanvasAgg):
        FigureCanvasAgg(fig)
    drawn: dict[int, Any] = {}
    with _DRAW_LOCK:
        text_draw = Text.draw

        def recording(self: Any, renderer: Any) -> Any:
            if self.get_visible() and self.get_text() != "":
                drawn.setdefault(id(self), self)
            return text_draw(self, renderer)

        Text.draw = recording
        try:
            with figure_style():
                fig.canvas.draw()
        finally:
            Text.draw = text_draw
    return fig.canvas.get_renderer(), list(drawn.values())


def _text_polygon(text: Any, renderer: Any) -> list[tuple[float, float]] | None:
    """The drawn text's rectangle in display pixels, rotated with the text (four corners); None if it has no area."""
    box = text.get_window_extent(renderer)
    if box.width <= 0 or box.height <= 0:
        return None
    angle = float(text.get_rotation()) % 180.0
    if min(angle, abs(angle - 90.0), 180.0 - angle) < 1e-6:
        return [(box.x0, box.y0), (box.x1, box.y0), (box.x1, box.y1), (box.x0, box.y1)]
    # a rotated rectangle shares its centre with its axis-aligned bounding box; measure it unrotated
    rotation = text.get_rotation()
    text.set_rotation(0.0)
    try:
        flat = text.get_window_extent(renderer)
    finally:
        text.set_rotation(rotation)
    cx, cy = (box.x0 + box.x1) / 2, (box.y0 + box.y1) / 2
    w, h = flat.width / 2, flat.height / 2
    c, s = math.cos(math.radians(angle)), math.sin(math.radians(angle))
    return [(cx + dx * c - dy * s, cy + dx * s + dy * c) for dx, dy in ((-w, -h), (w, -h), (w, h), (-w, h))]


def _box_polygon(box: Any) -> list[tuple[float, float]]:
    return [(box.x0, box.y0), (box.x1, box.y0), (box.x1, box.y1), (box.x0, box.y1)]


def _polygons_overlap(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> bool:
    """Two convex polygons overlap by more than the tolerance along every separating axis (the separating axis
    theorem: they are apart if their projections on some edge normal are apart)."""
    for k in (0, 1):  # their bounding boxes first: most pairs are far apart
        if min(max(p[k] for p in a), max(p[k] for p in b)) - max(min(p[k] for p in a), min(p[k] for p in b)) \
                <= _TOLERANCE_PX:
            return False
    for poly in (a, b):
        for (x0, y0), (x1, y1) in zip(poly, poly[1:] + poly[:1], strict=True):
            nx, ny = y0 - y1, x1 - x0
            norm = math.hypot(nx, ny)
            if norm == 0:
                continue
            nx, ny = nx / norm, ny / norm
            pa = [x * nx + y * ny for x, y in a]
            pb = [x * nx + y * ny for x, y in b]
            if min(max(pa), max(pb)) - max(min(pa), min(pb)) <= _TOLERANCE_PX:
                return False
    return True


def _inside(poly: list[tuple[float, float]], canvas: Any) -> bool:
    tol = _TOLERANCE_PX
    return all(
        canvas.x0 - tol <= x <= canvas.x1 + tol and canvas.y0 - tol <= y <= canvas.y1 + tol for x, y in poly
    )


def _legends(fig: Any) -> list[Any]:
    from matplotlib.legend import Legend

    return [lg for lg in fig.findobj(Legend) if lg.get_visible() and _all_visible(lg)]


def _all_visible(artist: Any) -> bool:
    """The artist and the axes or figure holding it are visible."""
    axes = getattr(artist, "axes", None)
    return artist.get_visible() and (axes is None or axes.get_visible())


def _legend_problems(fig: Any, renderer: Any, shapes: list[tuple[Any, list[tuple[float, float]]]]) -> list[str]:
    problems: list[str] = []
    legends = _legends(fig)
    boxes = [(lg, lg.get_window_extent(renderer)) for lg in legends]
    panels = [ax for ax in fig.get_axes() if ax.get_visible()]
    for k, (lg, box) in enumerate(boxes):
        name = _describe_legend(lg)
        poly = _box_polygon(box)
        if not _inside(poly, fig.bbox):
            problems.append(f"{name} leaves the canvas")
        own = {id(t) for t in (*lg.texts, lg.get_title())}
        for t, tpoly in shapes:
            if id(t) not in own and _polygons_overlap(poly, tpoly):
                problems.append(f"{name} overlaps text {_describe(t)}")
        for ax in panels:
            if _polygons_overlap(poly, _box_polygon(ax.bbox)):
                problems.append(f"{name} lies on the panel {_describe_axes(ax)}")
        for other, obox in boxes[k + 1 :]:
            if _polygons_overlap(poly, _box_polygon(obox)):
                problems.append(f"{name} overlaps {_describe_legend(other)}")
        seen: dict[tuple[Any, ...], str] = {}
        for handle, text in zip(lg.legend_handles, lg.texts, strict=False):
            if handle is None or not handle.get_visible():
                continue
            key = _encoding(handle)
            label = text.get_text()
            if key in seen:
                problems.append(f"{name}: entries {seen[key]!r} and {label!r} share colour, line style and marker")
            else:
                seen[key] = label
    return problems


def _seen_colour(color: Any, alpha: float | None = None) -> tuple[float, ...]:
    """A colour as it looks on white (alpha blended), rounded to 1/100."""
    from matplotlib.colors import to_rgba

    r, g, b, a = to_rgba(color, alpha)
    return tuple(round(a * c + (1.0 - a), 2) for c in (r, g, b))


def _encoding(handle: Any) -> tuple[Any, ...]:
    """What tells a legend entry apart: a line's colour, style and marker; a patch's face colour and hatch; a
    collection's face colour, edge colour and hatch."""
    from matplotlib.collections import Collection
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    if isinstance(handle, Line2D):
        marker = handle.get_marker()
        marker = None if marker in (None, "None", "none", "", " ") else str(marker)
        style = handle.get_linestyle()
        style = None if style in ("None", "none", "", " ") else str(style)
        face = _seen_colour(handle.get_markerfacecolor(), handle.get_alpha()) if marker else None
        return ("line", _seen_colour(handle.get_color(), handle.get_alpha()), style, marker, face)
    if isinstance(handle, Patch):
        return ("patch", _seen_colour(handle.get_facecolor()), handle.get_hatch() or None)
    if isinstance(handle, Collection):
        faces = handle.get_facecolor()
        edges = handle.get_edgecolor()
        face = _seen_colour(faces[0]) if len(faces) else None
        edge = _seen_colour(edges[0]) if len(edges) else None
        return ("collection", face, edge, handle.get_hatch() or None)
    return (type(handle).__name__, id(handle))


def _count_axis_problems(fig: Any) -> list[str]:
    problems = []
    for ax in fig.get_axes():
        if not ax.get_visible():
            continue
        for axis in (ax.xaxis, ax.yaxis):
            if not (is_count_axis(axis) and axis.get_visible()):
                continue
            lo, hi = sorted(axis.get_view_interval())
            span = max(hi - lo, 1e-12)
            fractional = [
                v
                for v in axis.get_majorticklocs()
                if lo - 1e-9 * span <= v <= hi + 1e-9 * span and abs(v - round(v)) > 1e-9
            ]
            if fractional:
                label = axis.get_label_text() or axis.axis_name
                problems.append(
                    f"the count axis {label!r} of {_describe_axes(ax)} has fractional ticks "
                    f"{[float(f'{v:g}') for v in fractional]}"
                )
    return problems


def _empty_panel_problems(fig: Any, drawn: list[Any]) -> list[str]:
    """A visible panel (not a colour bar) with no data drawn in it and no text inside it says nothing: a reference
    line (``axhline`` / ``axvline``), an empty collection or a bar of no height and no edge is not data."""
    problems = []
    on_canvas = {id(t) for t in drawn}
    for ax in fig.get_axes():
        if not ax.get_visible() or hasattr(ax, "_colorbar") or _shows_data(ax):
            continue
        if not [t for t in ax.texts if id(t) in on_canvas and t.get_text().strip()]:
            problems.append(f"the panel {_describe_axes(ax)} is empty and says nothing about why")
    return problems


def _shows_data(ax: Any) -> bool:
    import numpy as np
    from matplotlib.collections import PathCollection

    reference = (ax.get_xaxis_transform(which="grid"), ax.get_yaxis_transform(which="grid"))
    for line in ax.lines:
        if line.get_visible() and line.get_transform() not in reference:
            x, y = (np.asarray(v, dtype=float) for v in line.get_data())
            if (np.isfinite(x) & np.isfinite(y)).any():
                return True
    for patch in ax.patches:
        if not patch.get_visible():
            continue
        box = patch.get_extents()
        edge = patch.get_linewidth() > 0 and patch.get_edgecolor()[3] > 0
        if np.isfinite([box.x0, box.y0, box.x1, box.y1]).all() and (box.width * box.height > 0 or edge):
            return True
    for collection in ax.collections:
        if not collection.get_visible():
            continue
        if isinstance(collection, PathCollection):  # a scatter: its points are the offsets
            points = np.asarray(collection.get_offsets(), dtype=float).reshape(-1, 2)
            if np.isfinite(points).all(axis=1).any():
                return True
        elif any(len(path.vertices) for path in collection.get_paths()):
            return True
    return any(image.get_visible() for image in ax.images)


def _figure_title(fig: Any) -> str:
    suptitle = getattr(fig, "_suptitle", None)
    if suptitle is not None and suptitle.get_text():
        return suptitle.get_text()
    for ax in fig.get_axes():
        if ax.get_title():
            return ax.get_title()
    return "untitled"


def _describe(text: Any) -> str:
    s = text.get_text().replace("\n", " ")
    return repr(s if len(s) <= 40 else s[:39] + "…")


def _describe_axes(ax: Any) -> str:
    title = ax.get_title() or ax.get_ylabel() or ax.get_xlabel()
    return repr(title) if title else f"#{ax.figure.get_axes().index(ax) + 1}"


def _describe_legend(legend: Any) -> str:
    labels = [t.get_text() for t in legend.texts][:3]
    return f"the legend {labels}"
