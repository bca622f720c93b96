"""A device's part of a card: a MIG instance's fraction of its parent GPU (device facts, pure)."""

from __future__ import annotations


def mig_fraction(slice_units: int, total_units: int) -> float:
    """Fraction of a parent GPU a MIG slice holds: compute slices of the instance / of the GPU.

    E.g. a ``1g.10gb`` instance on an A100/H100 (7 compute slices) -> 1/7; ``3g.40gb`` -> 3/7.
    Source: NVIDIA MIG User Guide, "Supported MIG Profiles" (the ``Ng`` prefix is N of 7 GPCs).

    Raises:
        ValueError: ``total_units`` < 1, or ``slice_units`` not in [1, total_units].
    """
    if total_units < 1:
        raise ValueError(f"total_units: a GPU has at least 1 compute slice, got {total_units!r}")
    if not 1 <= slice_units <= total_units:
        raise ValueError(
            f"slice_units: must be between 1 and total_units={total_units}, got {slice_units!r}"
        )
    return slice_units / total_units
