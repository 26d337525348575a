# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The benchmark's plots from a lab run's results.json (issue 28 item 5): every measured point drawn above
the recipe's markers, the recipe's markers distinct and in the legend, no text cut off at the figure's edge."""

import json
import os

import pytest
from ansible_collections.sparkfold.cluster.plugins.module_utils import bench_plots

FIXTURE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                       "fixtures", "bench", "lab-depth-results.json")
MEASURED_LABELS = ("aggregate tok/s", "per-stream tok/s (median)", "decode tok/s (measured, median)",
                   "prefill tok/s (measured, median)", "TTFT (s) (measured, median)")
SKIPPED = "skipped: 262144 + 64 tokens exceeds the server's context of 131072"


@pytest.fixture(scope="module")
def drawn(tmp_path_factory):
    """The four figures drawn from the lab run (recorded by molecule's pair scenario), by the first line of their
    title, kept open and drawn for the tests to read (once: drawing is slow)."""
    import matplotlib.pyplot as plt

    with open(FIXTURE) as handle:
        run = json.load(handle)
    figures = {}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(plt, "close", lambda fig: figures.__setitem__(fig.axes[0].get_title().split("\n")[0], fig))
        bench_plots.draw_all(str(tmp_path_factory.mktemp("plots")), run["measurements"], run["expectations"],
                             run["stamp"])
    for fig in figures.values():
        fig.canvas.draw()
    yield figures
    for fig in figures.values():
        plt.figure(fig.number)
        plt.clf()


def _recipe_artists(ax, caps=True):
    """The lines the recipe's figures drew: error bars' markers (and caps), dashed lines."""
    out = []
    for container in ax.containers:
        if container.get_label().startswith("recipe:"):
            out += [container.lines[0], *(container.lines[1] if caps else ())]
    out += [line for line in ax.get_lines() if line.get_label().startswith("recipe:")]
    return out


def test_every_measured_point_is_drawn_above_the_recipes_markers(drawn):
    for title, fig in drawn.items():
        ax = fig.axes[0]
        measured = [line for line in ax.get_lines() if line.get_label() in MEASURED_LABELS]
        recipe = _recipe_artists(ax)
        assert measured and recipe, title
        assert min(line.get_zorder() for line in measured) > max(artist.get_zorder() for artist in recipe), title
        # Hollow: a measured point at the same place shows through the recipe's marker.
        for artist in _recipe_artists(ax, caps=False):
            assert artist.get_markerfacecolor() == "none", (title, artist.get_label())


def test_the_one_measured_depth_shares_its_place_with_the_recipes_marker_and_shows(drawn):
    ax = drawn["Decode tok/s vs depth"].axes[0]
    (measured,) = [line for line in ax.get_lines() if line.get_label() == "decode tok/s (measured, median)"]
    (recipe,) = [c for c in ax.containers if c.get_label().startswith("recipe:")]
    assert list(measured.get_xdata()) == [8192] and list(recipe.lines[0].get_xdata()) == [8192]
    assert measured.get_zorder() > recipe.lines[0].get_zorder()


def test_the_recipes_markers_are_distinct_and_labelled(drawn):
    fig = drawn["Throughput vs streams"]
    recipe = {c.get_label(): c.lines[0] for c in fig.axes[0].containers if c.get_label().startswith("recipe:")}
    assert sorted(recipe) == ["recipe: Aggregate decode at 3 streams, 180 tok/s",
                              "recipe: Per-stream decode at 3 streams, 60 tok/s"]
    (legend,) = fig.legends
    assert set(recipe) <= {t.get_text() for t in legend.get_texts()}
    styles = {(line.get_marker(), line.get_markeredgecolor()) for line in recipe.values()}
    markers = {marker for marker, _color in styles}
    colors = {color for _marker, color in styles}
    assert len(markers) == 2 and len(colors) == 2, styles


def test_no_text_is_cut_off_and_the_legend_covers_no_point(drawn):
    for title, fig in drawn.items():
        renderer = fig.canvas.get_renderer()
        box = fig.bbox
        ax = fig.axes[0]
        (legend,) = fig.legends
        texts = [*fig.texts, *ax.texts, *legend.get_texts(), ax.title, ax.xaxis.label, ax.yaxis.label]
        boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in texts if t.get_text().strip()]
        boxes += [("the axes with their tick labels", ax.get_tightbbox(renderer)),
                  ("the legend", legend.get_window_extent(renderer))]
        for what, ext in boxes:
            assert box.x0 <= ext.x0 and ext.x1 <= box.x1 and box.y0 <= ext.y0 and ext.y1 <= box.y1, (
                title, what, ext, box)
        assert legend.get_window_extent(renderer).y1 <= ax.get_tightbbox(renderer).y0, title
    notes = [t.get_text().replace("\n", " ") for t in drawn["Decode tok/s vs depth"].axes[0].texts]
    assert notes == [SKIPPED]  # whole, not cut at 60 characters
    note = " ".join(t.get_text() for t in drawn["Throughput vs streams"].texts)
    assert "at 1 stream it reads below the per-stream decode speed" in note
