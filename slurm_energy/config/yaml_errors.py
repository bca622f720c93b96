"""What a YAML syntax error in site.yaml means, in the words of the other config errors.

PyYAML's message (kept in full: it shows the line and a caret) names the parser's state, not the
admin's mistake. :func:`explain` adds one line in the form every config error has:
``FILE: line L, column C: what is wrong. Fix: ...`` (1-based, the position PyYAML reports as the
problem). Only the message text of PyYAML's ``MarkedYAMLError`` (``problem``, ``problem_mark``,
``context``, ``context_mark``) is read; no parsing is repeated.
"""

from __future__ import annotations

from typing import Any

#: (text in PyYAML's ``problem``, what is wrong, the fix); the first match wins. ``{cl}``/``{cc}``
#: are the line/column of PyYAML's ``context_mark`` (where the open construct started), ``{l}`` the
#: problem's line. Sources: PyYAML's scanner.py / parser.py messages (6.0).
_KINDS: tuple[tuple[str, str, str], ...] = (
    ("found character '\\t' that cannot start any token",
     "a tab character: YAML indents with spaces only",
     "replace the tab(s) at the start of line {l} with spaces (2 per level, as in the documented example site.yaml)"),
    ("mapping values are not allowed here",
     "a ':' where no key can start (two 'key: value' on one line, or a value containing ': ')",
     "put each key on its own line, indented under its parent, or quote a value that contains ': ' "
     "(e.g. note: \"a: b\")"),
    ("could not find expected ':'",
     "a line that is not 'key: value' (a missing ':', or a value continued on a line of its own)",
     "write 'key: value' (a space after the ':'), or quote a value that spans lines"),
    ("expected ',' or ']'",
     "the '[' list opened at line {cl}, column {cc} is not closed",
     "close it with ']' (items separated by ', ')"),
    ("expected ',' or '}'",
     "the '{{' mapping opened at line {cl}, column {cc} is not closed",
     "close it with '}}' (entries 'key: value' separated by ', ')"),
    ("found unexpected end of stream",
     "the quoted text opened at line {cl}, column {cc} is not closed",
     "add the closing quote (the same kind, ' or \", as the opening one)"),
    ("expected <block end>",
     "the indentation of line {l} matches no key above it",
     "indent it exactly as far as the keys beside it (its siblings), or further under its parent key; "
     "use spaces only"),
    ("found undefined alias",
     "an alias (*name) with no anchor (&name) before it",
     "define the anchor first, or quote the value if the '*' is literal text"),
    ("found unknown escape character",
     "an unknown backslash escape inside double quotes",
     "use single quotes for text with backslashes, or double the backslash"),
)

_GENERIC_FIX = ("correct the YAML at that position (compare with the documented example site.yaml; quote "
                "values that contain ': ', ' #' or start with a special character)")


def _mark(m: Any) -> tuple[int, int] | None:
    """(line, column), 1-based, of a PyYAML Mark; None when absent."""
    if m is None:
        return None
    return int(m.line) + 1, int(m.column) + 1


def _reader_error(e: Any, origin: str, text: str) -> str:
    """PyYAML's ReaderError (a character YAML does not allow), its ``position`` in ``text`` as line/column."""
    pos = int(getattr(e, "position", 0) or 0)
    line = text.count("\n", 0, pos) + 1
    col = pos - (text.rfind("\n", 0, pos) + 1) + 1
    ch = getattr(e, "character", None)
    what = f"character #x{ch:04x} is not allowed in YAML" if isinstance(ch, int) else str(getattr(e, "reason", e))
    return (f"{origin}: line {line}, column {col}: {what} (a control character). Fix: delete it, or save the "
            "file as plain UTF-8 text")


def explain(e: BaseException, origin: str, text: str = "") -> str | None:
    """One line ``ORIGIN: line L, column C: what is wrong. Fix: ...`` for PyYAML error ``e`` raised
    on ``text`` (needed only for a ReaderError, whose position is an offset); None when ``e``
    already carries its own fix (our duplicate-key error)."""
    if hasattr(e, "position") and hasattr(e, "character"):
        return _reader_error(e, origin, text)
    problem = str(getattr(e, "problem", None) or "")
    if "Fix:" in problem:
        return None
    where = _mark(getattr(e, "problem_mark", None)) or _mark(getattr(e, "context_mark", None))
    ctx = _mark(getattr(e, "context_mark", None)) or where or (0, 0)
    if "could not find expected ':'" in problem and getattr(e, "context_mark", None) is not None:
        where = ctx  # PyYAML notices it a line later; the key without ':' started at the context mark
    pos = f"line {where[0]}, column {where[1]}: " if where else ""
    for needle, what, fix in _KINDS:
        if needle in problem:
            fmt = dict(l=where[0] if where else "?", cl=ctx[0], cc=ctx[1])
            return f"{origin}: {pos}{what.format(**fmt)}. Fix: {fix.format(**fmt)}"
    if not problem:
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        return f"{origin}: {pos}{first}. Fix: {_GENERIC_FIX}"
    return f"{origin}: {pos}{problem}. Fix: {_GENERIC_FIX}"
