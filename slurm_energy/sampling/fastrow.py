"""A plain sample's line without Reading objects: the sampler's per-sample path in the steady state.

Once a sample has been written the general way (:meth:`Reader.read` -> :class:`Reading` s ->
:meth:`~slurm_energy.sampling.samplecodec.Encoder.sample_lines`, which compares every reading's
static part with the schema's), the next samples usually differ only in their values. When every
reader says what its steady state is (:meth:`Reader.steady`) and the schema written is that state,
a sample asks each reader for its values only (:meth:`Reader.fast_read`) and the encoder writes
them in the schema's column order (:meth:`Encoder.fast_line`): no object per reading, no
comparison of static parts per sample. The bytes are the same as the general path's (tested); any
departure (a reader returns None, the job's source or the node changes, a keyframe is due) takes
the general path for that sample, and a new schema is checked again.

Why: at a 1 s interval a sample runs with cold caches, and its cost is the Python it runs (issue
12: the per-sample CPU time was ~0.4 ms, a loop of the same reads ~0.19 ms).
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

from slurm_energy.sampling.readers.base import Reader
from slurm_energy.sampling.samplecodec import Encoder, _reading_key


class FastRow:
    """The readers' value functions for one schema of one encoder (:meth:`prepare` makes it)."""

    def __init__(self, enc: Encoder, fns: list[Callable[[Any], Optional[Sequence[Any]]]]):
        self.enc = enc
        self.sid = enc._sid
        self._fns = fns

    @classmethod
    def prepare(cls, readers: Sequence[Reader], enc: Optional[Encoder]) -> Optional["FastRow"]:
        """A FastRow for ``enc``'s current schema, or None: no encoder, a reader without a steady
        state (or not in it when the schema was written), or a schema other than the steady
        state's. Costs one :meth:`Reader.steady` per reader: called when the schema changes."""
        if enc is None or enc._schema is None or len(enc._schema) != 3:
            return None
        keys: list[tuple[Any, ...]] = []
        fns = []
        for r in readers:
            try:
                st = r.steady()
            except Exception:  # a reader must not break sampling: the general path then
                return None
            if st is None:
                return None
            keys += [_reading_key(x) for x in st]
            fns.append(r.fast_read)
        if enc._schema[2] != keys:
            return None
        return cls(enc, fns)

    def values(self, ns: Any) -> Optional[list[Any]]:
        """Every reader's values now, in the schema's column order; None when one is not in its
        steady state (or raised: :meth:`Reader.read` then says how) or the schema has changed."""
        if self.enc._sid != self.sid:
            return None
        out: list[Any] = []
        try:
            for f in self._fns:
                v = f(ns)
                if v is None:
                    return None
                out += v
        except Exception:
            return None
        return out
