"""Aligned and parsable tables as sacct prints them (``jobenergy``, ``rollup``): columns
right-justified and as wide as their widest value, or sacct's fixed ``%N`` widths; ``-p``/``-P``
bar-separated with the full values."""

from __future__ import annotations

from slurm_energy.textsafe import one_line


def _fit(text: str, width: int, left: bool, mark: str) -> str:
    """``text`` in exactly ``width`` characters: padded, or cut with ``mark`` as the last one."""
    if len(text) > width:
        text = text[: width - 1] + mark
    return text.ljust(width) if left else text.rjust(width)


#: The narrowest a wrapped last column gets (characters), however wide the columns before it are.
MIN_WRAP = 40


def render(rows: list[list[str]], headers: list[str], *, parsable: str = "", noheader: bool = False,
           wrap_to: int | None = None, widths: list[int | None] | None = None,
           caps: list[int | None] | None = None) -> str:
    """Table text. ``parsable``: ``""`` aligned columns (sacct default), ``"p"`` ``a|b|`` with a
    trailing bar (-p), ``"P"`` ``a|b`` (-P). ``wrap_to`` (aligned only; ``-l``'s Covers): the line
    width in characters; the last column is then left-aligned and wrapped at word boundaries to
    what is left of it (at least :data:`MIN_WRAP`), continuation lines indented under it.
    Aligned only: ``widths`` (per column, :func:`~slurm_energy.cli.jobenergy_format.parse_format`): a
    fixed width N (-N: left-justified), header included, a longer value cut with ``+`` last
    (sacct's ``%N``); ``caps`` (per column, where ``widths`` gives none): at most that many
    characters, a longer value cut with ``…`` last. Every cell and header is shown as one line
    (:func:`~slurm_energy.textsafe.one_line`): a job name or path holding a newline, an escape
    sequence or an undecodable byte can neither forge a row nor drive the user's terminal."""
    rows = [[one_line(c) for c in r] for r in rows]
    headers = [one_line(h) for h in headers]
    if wrap_to is not None and not parsable and headers:
        return _render_wrapped(rows, headers, noheader, wrap_to)
    lines = []
    if parsable:
        tail = "|" if parsable == "p" else ""
        if not noheader:
            lines.append("|".join(headers) + tail)
        lines += ["|".join(r) + tail for r in rows]
        return "\n".join(lines)
    none: list[int | None] = [None] * len(headers)
    fixed = widths or none
    cap = caps or none
    auto = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]
    cols: list[tuple[int, bool, str]] = []  # (width, left-justified, mark for a cut value)
    for i, w in enumerate(auto):
        fx, cp = fixed[i], cap[i]
        if fx is not None:
            cols.append((abs(fx), fx < 0, "+"))
        elif cp is not None and w > cp:
            cols.append((max(cp, len(headers[i])), False, "…"))
        else:
            cols.append((w, False, ""))
    if not noheader:
        lines.append(" ".join((h[:w].ljust(w) if left else h[:w].rjust(w)) for h, (w, left, _) in zip(headers, cols)))
        lines.append(" ".join("-" * w for w, _, _ in cols))
    lines += [" ".join(_fit(c, w, left, mark) for c, (w, left, mark) in zip(r, cols)) for r in rows]
    return "\n".join(lines)


def _render_wrapped(rows: list[list[str]], headers: list[str], noheader: bool, line_width: int) -> str:
    import textwrap

    head = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers[:-1])]
    indent = sum(head) + len(head)  # the columns before the last, each followed by one space
    last_w = max(MIN_WRAP, line_width - indent)
    width = min(last_w, max([len(headers[-1])] + [len(r[-1]) for r in rows]))
    lines = []
    if not noheader:
        lines.append(" ".join([h.rjust(w) for h, w in zip(headers, head)] + [headers[-1]]))
        lines.append(" ".join("-" * w for w in head + [width]))
    for r in rows:
        parts = textwrap.wrap(r[-1], width=width, break_on_hyphens=False) or [""]
        lines.append(" ".join([c.rjust(w) for c, w in zip(r, head)] + [parts[0]]).rstrip())
        lines += [" " * indent + p for p in parts[1:]]
    return "\n".join(lines)


def render_with_notes(rows: list[list[str]], headers: list[str], notes: list[str], *, line_width: int,
                      noheader: bool = False) -> str:
    """An aligned table (:func:`render`) with a note under each row that has one: indented to the
    second column and wrapped at word boundaries to ``line_width`` (at least :data:`MIN_WRAP`
    characters of text per line), so long texts never widen the table (``jobenergy -l``)."""
    import textwrap

    lines = render(rows, headers, noheader=noheader).split("\n")
    head, body = (lines[:0], lines) if noheader else (lines[:2], lines[2:])
    indent = max([len(headers[0])] + [len(r[0]) for r in rows]) + 1
    width = max(MIN_WRAP, line_width - indent)
    out = list(head)
    for line, note in zip(body, notes):
        out.append(line.rstrip())
        out += [" " * indent + p for p in textwrap.wrap(one_line(note), width=width, break_on_hyphens=False)]
    return "\n".join(out)
