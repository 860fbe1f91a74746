"""Reporting: metrics of a replay, Perfetto export, the HTML report and its figures.

* :mod:`lumos.report.html`: :func:`~lumos.report.html.write_report`, a self-contained HTML report.
* :mod:`lumos.report.figures`: the report's charts as SVG (and PNG with ``lumos[plot]``).
"""
