"""The study's figures (matplotlib, Agg), each as PDF and PNG, reproducible byte for byte.

* :mod:`.build` — the four figures and their writer (``write_figures``), drawn and saved
  without time stamps so equal statistics give equal bytes;
* :mod:`.layout` — the page: labelled configuration rows in sections, agents as columns,
  every figure :data:`FIGURE_WIDTH_IN` wide;
* :mod:`.marks` — a missing number drawn as missing and footnoted.
"""

from forgetting.report.figures.build import (
    BUILDERS,
    FIGURE_FORMATS,
    FIGURE_WIDTH_IN,
    FIGURES,
    PNG_DPI,
    build_figure,
    figure_paths,
    save_figure,
    write_figures,
)

__all__ = [
    "BUILDERS",
    "FIGURES",
    "FIGURE_FORMATS",
    "FIGURE_WIDTH_IN",
    "PNG_DPI",
    "build_figure",
    "figure_paths",
    "save_figure",
    "write_figures",
]
