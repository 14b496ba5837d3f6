"""Figures and the HTML/Markdown report, drawn from the results store only."""

from attnlab.report.build import Report, build_report, collect_outcomes
from attnlab.report.render import format_numbers

__all__ = ["Report", "build_report", "collect_outcomes", "format_numbers"]
