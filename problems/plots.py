"""Plots for calculators: a small description of lines (`Plot`) turned into plotly figure JSON
(a plain dict, drawn in the browser by the vendored plotly.js) and into a text table of the same
numbers for screen readers and for readers without JavaScript.

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


def plot_figure(plot: Plot) -> dict:
    """The plotly figure for `plot`: {"data": [...], "layout": {...}}, every number finite."""
    data = []
    for index, series in enumerate(plot.series):
        points = _finite_points(series, x_log=plot.x_log, y_log=plot.y_log)
        line: dict[str, object] = {"color": PALETTE[index % len(PALETTE)], "width": 2}
        if series.dash:
            line["dash"] = "dash"
        data.append({
            "type": "scatter",
            "mode": "lines+markers" if series.markers else "lines",
            "name": series.name,
            "x": [x for x, _ in points],
            "y": [y for _, y in points],
            "line": line,
        })
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
                  "automargin": True},
        "yaxis": y_axis,
        "shapes": shapes,
        "annotations": annotations,
        "showlegend": len(plot.series) > 1,
        "legend": {"orientation": "h", "y": -0.25},
        "margin": {"l": 60, "r": 20, "t": 50, "b": 60},
        "height": 340,
    }
    return {"data": data, "layout": layout}


def plot_table(plot: Plot) -> dict[str, list]:
    """The plot's numbers as a table: {"headers": [x title, series names...], "rows": [[...]]}.

    One row per x value across every series, values formatted for people; a blank cell where a
    series has no point at that x.
    """
    columns = [dict(_finite_points(s, x_log=plot.x_log, y_log=plot.y_log)) for s in plot.series]
    xs = sorted({x for column in columns for x in column})
    rows = [[number_format(x)] + [number_format(c[x]) if x in c else "" for c in columns]
            for x in xs]
    return {"headers": [plot.x_title] + [s.name for s in plot.series], "rows": rows}


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
