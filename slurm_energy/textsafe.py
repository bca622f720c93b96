"""Text a user controls (job name, comment, work dir, phase names...): kept without loss, shown safely.

Linux hands Python bytes (environment, /proc, Slurm's output, marks files); what is not UTF-8 is
decoded with ``surrogateescape`` wherever it enters (os.environ does so already), so nothing is lost
and nothing raises there. Such a string cannot be encoded as UTF-8 (JSON, SQL, HTML): a record's
text is made safe once by :func:`slurm_energy.model.text_safe`, which shows each undecodable byte
as ``\\xNN`` and keeps the original bytes (hex) in ``JobRecord.raw_text``. Log lines get
:func:`one_line`. Stdlib only, no imports: the Prolog/Epilog's log uses it.
"""

from __future__ import annotations


def has_surrogates(text: str) -> bool:
    """True if ``text`` holds a lone surrogate (an undecodable byte kept by ``surrogateescape``)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def text_bytes(text: str) -> bytes:
    """The bytes ``text`` was decoded from (``surrogateescape``; a surrogate not from a byte, e.g. a
    JSON ``\\ud800``, as its UTF-8 form, ``surrogatepass``)."""
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass")


def shown_text(text: str) -> str:
    """``text`` with every undecodable byte shown as ``\\xNN`` (valid UTF-8: storable, printable);
    text without one is returned as is."""
    if not has_surrogates(text):
        return text
    return text_bytes(text).decode("utf-8", "backslashreplace")


def decode_text(data: bytes) -> str:
    """``data`` as text without loss: UTF-8, undecodable bytes kept as surrogates (``surrogateescape``)."""
    return data.decode("utf-8", "surrogateescape")


def one_line(text: str) -> str:
    """``text`` for a log line: CR, LF and other control characters escaped (``\\n``, ``\\x1b``),
    undecodable bytes as ``\\xNN``: a user's job name or path cannot forge a log line."""
    text = shown_text(text)
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() or c == " " else repr(c)[1:-1] for c in text)
