"""Figures in the report: legends and labels no smaller than MIN_FONT_PT, whatever the figure chose."""

from __future__ import annotations

from attnlab.report.figures import MIN_FONT_PT, legible, new_figure


def test_small_legends_and_labels_are_raised_and_large_ones_kept():
    fig, axes = new_figure(1, 2)
    a, b = axes[0]
    a.plot([0, 1], label="tiny")
    a.legend(fontsize=5, title="t", title_fontsize=5)
    a.set_xlabel("x", fontsize=6)
    b.plot([0, 1], label="big")
    b.legend(fontsize=14)
    b.tick_params(labelsize=4)
    fig.legend(["fig-level"], fontsize=5)
    legible(fig)
    sizes = [t.get_fontsize() for t in a.get_legend().get_texts()] + [
        a.get_legend().get_title().get_fontsize()
    ]
    sizes += [t.get_fontsize() for t in fig.legends[0].get_texts()]
    sizes += [a.xaxis.label.get_fontsize(), *(t.label1.get_fontsize() for t in b.xaxis.get_major_ticks())]
    assert min(sizes) >= MIN_FONT_PT
    assert b.get_legend().get_texts()[0].get_fontsize() == 14
