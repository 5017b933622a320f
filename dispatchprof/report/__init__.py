"""Reports: rows first, then render. Console tables (summary, module tree, operators, top
modules, module types), generation tables, CSV, the Perfetto trace, the roofline plot and the
merged report of several ranks. Library code returns strings; nothing here prints.

``from dispatchprof import report; report.summary(...)`` reaches the tables directly.
"""

from dispatchprof.report.render import LEGEND, WIDTH, render, table_format, wrap
from dispatchprof.report.tables import (
    COLUMNS, DEFAULT_COLUMNS, module_tree, module_types, operator_table, summary, top_modules,
)

__all__ = ["COLUMNS", "DEFAULT_COLUMNS", "LEGEND", "module_tree", "module_types", "operator_table", "render",
           "summary", "table_format", "top_modules", "WIDTH", "wrap"]
