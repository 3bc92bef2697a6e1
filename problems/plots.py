"""Plots for calculators: a small description of lines (`Plot`) or bars (`BarPlot`) turned into
plotly figure JSON (a plain dict, drawn in the browser by the vendored plotly.js) and into a text
table of the same numbers for screen readers and for readers without JavaScript.

Bars come grouped, stacked or overlaid, vertical or horizontal, and may float: give a series a
`base` per bar and each bar spans base to base + value, which is what a waterfall (each lever
from the level before it) and a tornado (each assumption from its low to its high result) need.

No plotly Python package: the figure is just `{"data": [...], "layout": {...}}`. Builders pass
values already in the units their axis titles name (ms, GB, ...), computed by
`problems/arithmetic`; points whose value is not finite are dropped, so the JSON never holds NaN
or Infinity.
"""

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from problems.arithmetic.units import number_format

# Colours with enough contrast on white, distinguishable in the common colour-vision deficiencies
# (the Okabe–Ito palette).
PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9")


@dataclass(frozen=True)
class Series:
    """One line: `x` and `y` in the plot's axis units; `dash` draws it dashed (a bound, a limit)."""

    name: str
    x: tuple[float, ...]
    y: tuple[float, ...]
    dash: bool = False
    markers: bool = False
    # Drawn as a staircase (each value holds until the next x): capacity that changes in steps.
    step: bool = False
    # Points only, no line between them (one point per format, say); `labels` are printed
    # beside the points, one per point.
    lines: bool = True
    labels: tuple[str, ...] | None = None
    # Where each label sits against its point (plotly's textposition: "top center",
    # "middle right", ...), so labels of nearby points do not print over each other.
    label_positions: tuple[str, ...] | None = None
    # Markers drawn as open circles: a prediction set beside measured, filled points.
    hollow: bool = False
    # A colour of its own instead of the palette's next (a GPU's points in its line's colour).
    color: str | None = None


@dataclass(frozen=True)
class Mark:
    """A vertical line at `x` with a short label: the ridge point, the learner's chosen input."""

    x: float
    label: str


@dataclass(frozen=True)
class Plot:
    """A line chart: its title, axis titles with units, the lines, and marks on the x axis."""

    title: str
    x_title: str
    y_title: str
    series: tuple[Series, ...]
    marks: tuple[Mark, ...] = field(default_factory=tuple)
    x_log: bool = False
    y_log: bool = False
    y_from_zero: bool = True
    # False: no legend, the series labelled on the plot itself (many series in a small plot).
    legend: bool = True
    # True: x counts whole things (attempts, replicas), so the axis ticks only at integers.
    x_integer: bool = False


def _finite_points(series: Series, *, x_log: bool, y_log: bool) -> list[tuple[float, float]]:
    points = []
    for x, y in zip(series.x, series.y, strict=True):
        if not (math.isfinite(x) and math.isfinite(y)):
            continue
        # A log axis cannot place zero or a negative value.
        if (x_log and x <= 0) or (y_log and y <= 0):
            continue
        points.append((float(x), float(y)))
    return points


def plot_figure(plot: "Plot | BarPlot") -> dict:
    """The plotly figure for `plot`: {"data": [...], "layout": {...}}, every number finite
    (a bar whose value is not finite is left out as null)."""
    if isinstance(plot, BarPlot):
        return _bar_figure(plot)
    data = []
    for index, series in enumerate(plot.series):
        points = _finite_points(series, x_log=plot.x_log, y_log=plot.y_log)
        line: dict[str, object] = {"color": series.color or PALETTE[index % len(PALETTE)],
                                   "width": 2}
        if series.dash:
            line["dash"] = "dash"
        if series.step:
            line["shape"] = "hv"
        trace = {
            "type": "scatter",
            "mode": "lines+markers" if series.markers else "lines",
            "name": series.name,
            "x": [x for x, _ in points],
            "y": [y for _, y in points],
            "line": line,
        }
        if not series.lines:
            trace["mode"] = "markers"
            trace["marker"] = {"size": 9, "color": line["color"]}
        if series.hollow:
            trace["marker"] = {"size": 10, "color": line["color"], "symbol": "circle-open",
                               "line": {"width": 2}}
        if series.labels is not None:
            drawn = set(points)
            positions = series.label_positions or ("top center",) * len(series.labels)
            kept = [(label, where) for x, y, label, where
                    in zip(series.x, series.y, series.labels, positions, strict=True)
                    if (x, y) in drawn]
            trace["mode"] += "+text"
            trace["text"] = [label for label, _ in kept]
            trace["textposition"] = [where for _, where in kept]
            trace["textfont"] = {"size": 11}
        data.append(trace)
    shapes = []
    annotations = []
    for mark in plot.marks:
        if not math.isfinite(mark.x) or (plot.x_log and mark.x <= 0):
            continue
        # On a log axis plotly takes a shape's x as the value itself but an annotation's x as
        # the value's log10.
        x = float(mark.x)
        shapes.append({"type": "line", "xref": "x", "yref": "paper", "x0": x, "x1": x,
                       "y0": 0, "y1": 1, "line": {"color": "#555555", "width": 1, "dash": "dot"}})
        annotations.append({"x": math.log10(x) if plot.x_log else x, "xref": "x", "y": 1,
                            "yref": "paper", "text": mark.label,
                            "showarrow": False, "xanchor": "left", "yanchor": "bottom",
                            "font": {"size": 11}})
    y_axis: dict[str, object] = {"title": {"text": plot.y_title},
                                 "type": "log" if plot.y_log else "linear", "automargin": True}
    if plot.y_from_zero and not plot.y_log:
        y_axis["rangemode"] = "tozero"
    layout = {
        "title": {"text": plot.title, "font": {"size": 15}},
        "xaxis": {"title": {"text": plot.x_title}, "type": "log" if plot.x_log else "linear",
                  "automargin": True,
                  **({"tickformat": "d", "dtick": 1, "tick0": 1} if plot.x_integer else {})},
        "yaxis": y_axis,
        "shapes": shapes,
        "annotations": annotations,
        **_legend_below(plot.legend and len(plot.series) > 1, len(plot.series), height=340),
    }
    return {"data": data, "layout": layout}


def _legend_below(shown: bool, entries: int, *, height: int) -> dict:
    """Legend under the x axis's title, with the figure grown to hold it (a row per three
    entries), so the two never overlap."""
    rows = -(-entries // 3) if shown else 0
    return {
        "showlegend": shown,
        # Anchored to the bottom of the whole figure (container), below the axis title.
        "legend": {"orientation": "h", "x": 0, "xanchor": "left", "yref": "container", "y": 0,
                   "yanchor": "bottom"},
        "margin": {"l": 60, "r": 20, "t": 50, "b": 64 + 24 * rows},
        "height": height + 24 * rows,
    }


def plot_table(plot: "Plot | BarPlot") -> dict[str, list]:
    """The plot's numbers as a table: {"headers": [x title, series names...], "rows": [[...]],
    "unit": what the series' cells are in (the y axis's or the bars' value title)}.

    One row per x value across every series, values formatted for people; a blank cell where a
    series has no point at that x. For bars, one row per category (a floating bar reads
    "from to"), then the plot's extra columns.
    """
    if isinstance(plot, BarPlot):
        return {**_bar_table(plot), "unit": plot.value_title}
    columns = [dict(_finite_points(s, x_log=plot.x_log, y_log=plot.y_log)) for s in plot.series]
    xs = sorted({x for column in columns for x in column})
    rows = [[number_format(x)] + [number_format(c[x]) if x in c else "" for c in columns]
            for x in xs]
    # The y axis's title travels with the table: its cells carry no unit of their own.
    return {"headers": [plot.x_title] + [s.name for s in plot.series], "rows": rows,
            "unit": plot.y_title}


def series_values(xs: list[float] | list[int],
                  value_at: Callable[[float], float]) -> tuple[float, ...]:
    """`value_at(x)` for each x; NaN (dropped from the figure) where the formula refuses that x,
    as when a batch no longer fits or a split is uneven."""
    values = []
    for x in xs:
        try:
            values.append(float(value_at(x)))
        except (ArithmeticError, ValueError):
            values.append(math.nan)
    return tuple(values)


def sweep_points(start: float, stop: float, *, count: int = 24, log: bool = False) -> list[float]:
    """`count` x values from `start` to `stop` inclusive, evenly spaced (geometrically when
    `log`)."""
    if count < 2 or start == stop:
        return [start]
    if log:
        ratio = (stop / start) ** (1 / (count - 1))
        return [start * ratio**i for i in range(count)]
    step = (stop - start) / (count - 1)
    return [start + step * i for i in range(count)]


def sweep_whole(start: int, stop: int, *, count: int = 24) -> list[int]:
    """Distinct whole numbers from `start` to `stop`, roughly geometric (batch sizes, lengths)."""
    if stop <= start:
        return [start]
    values = {round(v) for v in sweep_points(max(start, 1), stop, count=count, log=True)}
    values.update({start, stop})
    return sorted(v for v in values if start <= v <= stop)


def series_fit_split(name: str, xs: list[float] | list[int], values: tuple[float, ...],
                     fits: tuple[bool, ...], *, dash: bool = False) -> tuple[Series, ...]:
    """One line drawn where the setup fits in memory and, dashed, where it does not (labelled
    as such), so a fit flag is always on the plot. Empty halves are left out."""
    inside = tuple(v if ok else math.nan for v, ok in zip(values, fits, strict=True))
    outside = tuple(math.nan if ok else v for v, ok in zip(values, fits, strict=True))
    found = []
    if any(math.isfinite(v) for v in inside):
        found.append(Series(name, tuple(xs), inside, dash=dash))
    if any(math.isfinite(v) for v in outside):
        found.append(Series(f"{name}: does not fit in memory", tuple(xs), outside, dash=True))
    return tuple(found)


@dataclass(frozen=True)
class BarSeries:
    """One set of bars, one value per category, in the plot's value-axis unit.

    `base` makes the bars float: bar i spans base[i] to base[i] + values[i] (a negative value
    hangs down from its base). `labels` are printed at the bars' ends; `colors` give each bar
    its own colour (a waterfall's savings and increases); `outline` draws the bars as empty
    outlines, for predictions set beside measured, filled bars. A value that is not finite
    leaves its category empty.
    """

    name: str
    values: tuple[float, ...]
    base: tuple[float, ...] | None = None
    labels: tuple[str, ...] | None = None
    colors: tuple[str, ...] | None = None
    outline: bool = False


@dataclass(frozen=True)
class Line:
    """A reference line across the bars at `value` on the value axis (a target, a limit)."""

    value: float
    label: str


@dataclass(frozen=True)
class BarPlot:
    """A bar chart: categories along one axis, values (with their unit) along the other.

    `mode` is "group" (series side by side), "stack" or "overlay". `horizontal` lays the bars
    along x with the first category on top, as a tornado plot reads. `columns` add columns of
    text to the table beside the plot (header, one cell per category).
    """

    title: str
    categories: tuple[str, ...]
    value_title: str
    series: tuple[BarSeries, ...]
    category_title: str = ""
    mode: str = "group"
    horizontal: bool = False
    lines: tuple[Line, ...] = field(default_factory=tuple)
    columns: tuple[tuple[str, tuple[str, ...]], ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        if self.mode not in ("group", "stack", "overlay"):
            raise ValueError(f"bar mode {self.mode!r} must be group, stack or overlay")
        count = len(self.categories)
        for series in self.series:
            for part in (series.values, series.base, series.labels, series.colors):
                if part is not None and len(part) != count:
                    raise ValueError(f"series {series.name!r} needs one entry per category")
        for header, cells in self.columns:
            if len(cells) != count:
                raise ValueError(f"column {header!r} needs one cell per category")


def _finite_or_none(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None


def _bar_figure(plot: BarPlot) -> dict:
    data = []
    for index, series in enumerate(plot.series):
        colour = PALETTE[index % len(PALETTE)]
        values = [_finite_or_none(v) for v in series.values]
        marker: dict[str, object] = {"color": list(series.colors) if series.colors else colour}
        if series.outline:
            marker = {"color": "rgba(0,0,0,0)",
                      "line": {"color": list(series.colors) if series.colors else colour,
                               "width": 2}}
        trace: dict[str, object] = {"type": "bar", "name": series.name, "marker": marker}
        categories = list(plot.categories)
        if plot.horizontal:
            trace.update(orientation="h", x=values, y=categories)
        else:
            trace.update(x=categories, y=values)
        if series.base is not None:
            trace["base"] = [_finite_or_none(b) for b in series.base]
        if series.labels is not None:
            trace.update(text=list(series.labels), textposition="outside", textangle=0,
                         textfont={"size": 10}, cliponaxis=False)
        data.append(trace)
    shapes, annotations = [], []
    for index, line in enumerate(plot.lines):
        if not math.isfinite(line.value):
            continue
        value = float(line.value)
        # Neighbouring lines' labels go to alternate sides so they do not print over each other.
        side = "right" if index % 2 == 0 else "left"
        if plot.horizontal:
            shapes.append({"type": "line", "xref": "x", "yref": "paper", "x0": value,
                           "x1": value, "y0": 0, "y1": 1,
                           "line": {"color": "#555555", "width": 1.5, "dash": "dot"}})
            annotations.append({"x": value, "xref": "x", "y": 1, "yref": "paper",
                                "text": line.label, "showarrow": False, "xanchor": side,
                                "yanchor": "bottom", "font": {"size": 11}})
        else:
            shapes.append({"type": "line", "xref": "paper", "yref": "y", "x0": 0, "x1": 1,
                           "y0": value, "y1": value,
                           "line": {"color": "#555555", "width": 1.5, "dash": "dot"}})
            annotations.append({"x": 1, "xref": "paper", "y": value, "yref": "y",
                                "text": line.label, "showarrow": False, "xanchor": "right",
                                "yanchor": "bottom", "font": {"size": 11}})
    value_axis = {"title": {"text": plot.value_title}, "automargin": True, "zeroline": True}
    category_axis: dict[str, object] = {"title": {"text": plot.category_title},
                                        "automargin": True, "type": "category"}
    if plot.horizontal:
        # Plotly puts the first category at the bottom; a tornado reads from the top.
        category_axis["autorange"] = "reversed"
    rows = len(plot.categories)
    layout = {
        "title": {"text": plot.title, "font": {"size": 15}},
        "barmode": plot.mode,
        "xaxis": value_axis if plot.horizontal else category_axis,
        "yaxis": category_axis if plot.horizontal else value_axis,
        "shapes": shapes,
        "annotations": annotations,
        **_legend_below(len(plot.series) > 1, len(plot.series),
                        height=max(340, 90 + 34 * rows) if plot.horizontal else 340),
    }
    return {"data": data, "layout": layout}


def _bar_cell(value: float, base: float | None) -> str:
    if not math.isfinite(value):
        return ""
    if base is None:
        return number_format(value)
    if not math.isfinite(base):
        return ""
    return f"{number_format(base)} to {number_format(base + value)}"


def _bar_table(plot: BarPlot) -> dict[str, list]:
    # A header for every column: an empty one is a screen reader's (and axe's) dead end.
    headers = [plot.category_title or "case", *(s.name for s in plot.series),
               *(header for header, _ in plot.columns)]
    rows = []
    for i, category in enumerate(plot.categories):
        cells = [_bar_cell(s.values[i], None if s.base is None else s.base[i])
                 for s in plot.series]
        rows.append([category, *cells, *(column[i] for _, column in plot.columns)])
    return {"headers": headers, "rows": rows}
