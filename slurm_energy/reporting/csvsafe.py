"""CSV cells a spreadsheet cannot take for a formula (OWASP, "CSV Injection").

A job's user names its phases (and, through Slurm, its job and work dir); a cell of theirs that
begins with ``=``, ``+``, ``-`` or ``@`` (or a tab or carriage return, which some spreadsheets skip
before reading one of those) would be run as a formula by whoever opens the report or rollup in a
spreadsheet. OWASP's rule: prefix such a cell with a single quote (and keep it quoted by the CSV
writer), so it is shown as the text it is. Numbers this package writes are never text cells.
"""

from __future__ import annotations

from enum import Enum

from slurm_energy.reporting.scale import plain

#: The first characters that make a spreadsheet read a cell as a formula (OWASP CSV Injection).
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def safe_cell(text: str) -> str:
    """``text`` as a CSV cell no spreadsheet evaluates: ``'`` prefixed where it begins with one of
    :data:`FORMULA_START`, else unchanged (``"=1+2"`` -> ``"'=1+2"``, ``"train"`` -> ``"train"``)."""
    return "'" + text if text.startswith(FORMULA_START) else text


def cell(v: object) -> str:
    """A report CSV cell: ``None`` -> empty (unmeasured, never 0), an enum its value, a float in plain
    decimals to 9 significant digits (``0.000136900``, never ``1.369e-04``: spreadsheets read both),
    text through :func:`safe_cell` (a user's text is never a formula)."""
    if v is None:
        return ""
    if isinstance(v, Enum):
        return str(v.value)
    if isinstance(v, float):
        return plain(v, 9)
    return safe_cell(v) if isinstance(v, str) else str(v)
