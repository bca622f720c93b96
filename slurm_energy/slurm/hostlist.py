"""Expand Slurm hostlist expressions without ``scontrol`` (the Prolog has no PATH and must be fast).

Syntax handled (the subset Slurm's ``hostlist.c`` writes into ``SLURM_NODELIST`` /
``SLURM_JOB_NODELIST``):

* comma-separated items at the top level: ``"gpu01,n1"``;
* bracketed ranges and lists inside an item: ``"n[1-3,5]"`` -> n1 n2 n3 n5;
* zero padding kept from the lower bound's width: ``"a[01-02]b"`` -> a01b a02b;
* several bracket groups in one item expand as a cartesian product, left to right:
  ``"r[1-2]n[1-2]"`` -> r1n1 r1n2 r2n1 r2n2.

Order is preserved and duplicates are kept once (first occurrence), as ``scontrol show hostnames``
does for the lists Slurm itself produces.
"""

from __future__ import annotations

import re

_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")

#: Refuse absurd expansions (a typo like n[1-99999999] must not eat the Prolog's memory).
MAX_HOSTS = 1_000_000


def _split_top(s: str) -> list[str]:
    """Split at commas that are not inside brackets. Raises ValueError on unbalanced brackets."""
    items: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in s:
        if ch == "[":
            depth += 1
            if depth > 1:
                raise ValueError(f"hostlist {s!r}: nested '[' is not valid Slurm hostlist syntax")
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise ValueError(f"hostlist {s!r}: ']' without a matching '['")
        if ch == "," and depth == 0:
            items.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if depth != 0:
        raise ValueError(f"hostlist {s!r}: '[' without a matching ']'")
    items.append("".join(cur))
    return items


def _expand_ranges(body: str, whole: str) -> list[str]:
    """``"1-3,05"`` -> ``["1", "2", "3", "05"]`` (padding from the lower bound's width)."""
    out: list[str] = []
    for part in body.split(","):
        m = _RANGE.match(part.strip())
        if not m:
            raise ValueError(
                f"hostlist {whole!r}: bad range {part!r} inside brackets; "
                "use digits, e.g. n[1-3,5] or n[01-10]"
            )
        lo_s, hi_s = m.group(1), m.group(2)
        if hi_s is None:
            out.append(lo_s)
            continue
        lo, hi = int(lo_s), int(hi_s)
        if hi < lo:
            raise ValueError(f"hostlist {whole!r}: range {part!r} runs backwards; write it low-high")
        if hi - lo + 1 > MAX_HOSTS:
            raise ValueError(f"hostlist {whole!r}: range {part!r} has more than {MAX_HOSTS} hosts")
        width = len(lo_s)
        out.extend(str(i).zfill(width) for i in range(lo, hi + 1))
    return out


def _expand_item(item: str, whole: str) -> list[str]:
    """One top-level item (no top-level commas) -> host names (cartesian over bracket groups)."""
    pieces = re.split(r"(\[[^\]]*\])", item)
    names = [""]
    for piece in pieces:
        if piece.startswith("[") and piece.endswith("]"):
            alts = _expand_ranges(piece[1:-1], whole)
            if len(names) * len(alts) > MAX_HOSTS:
                raise ValueError(f"hostlist {whole!r} expands to more than {MAX_HOSTS} hosts")
            names = [n + a for n in names for a in alts]
        else:
            names = [n + piece for n in names]
    return names


def expand_hostlist(s: str) -> list[str]:
    """Expand a Slurm hostlist expression into host names, in order.

    Args:
        s: e.g. ``"n[1-3,5],gpu01,a[01-02]b"`` (``SLURM_NODELIST`` / ``SLURM_JOB_NODELIST``).
            Surrounding whitespace is ignored; ``""`` gives ``[]``.

    Returns:
        list[str] of host names, duplicates removed (first occurrence kept), e.g.
        ``["n1", "n2", "n3", "n5", "gpu01", "a01b", "a02b"]``.

    Raises:
        ValueError: unbalanced or nested brackets, a non-numeric or backwards range, an empty host
            name (``"n1,,n2"``), or more than :data:`MAX_HOSTS` hosts. The message quotes the
            expression and the bad part.

    Source of the syntax: Slurm ``src/common/hostlist.c`` and the ``scontrol show hostnames`` man
    page (ranges ``lo-hi``, lists ``a,b``, zero padding kept from the range bounds).
    """
    if not isinstance(s, str):
        raise TypeError(f"hostlist must be a str, got {type(s).__name__}: {s!r}")
    s = s.strip()
    if not s:
        return []
    seen: set[str] = set()
    out: list[str] = []
    for item in _split_top(s):
        item = item.strip()
        if not item:
            raise ValueError(f"hostlist {s!r}: empty host name (two commas in a row or a trailing comma)")
        for name in _expand_item(item, s):
            if name not in seen:
                seen.add(name)
                out.append(name)
    return out
