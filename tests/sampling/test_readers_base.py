"""The readers' base: closing a sampler's readers, one of which fails to close."""

from __future__ import annotations

import logging

from slurm_energy.sampling.readers.base import UnavailableReader, close_readers


class _Closing(UnavailableReader):
    def __init__(self, name: str, fails: bool, closed: list[str]):
        super().__init__("gpu", ["0"], "test")
        self.name, self.fails, self.closed = name, fails, closed

    def close(self) -> None:
        if self.fails:
            raise OSError("device gone")
        self.closed.append(self.name)


def test_a_reader_that_fails_to_close_is_logged_and_the_rest_still_closed(caplog):
    closed: list[str] = []
    with caplog.at_level(logging.ERROR, logger="slurm_energy.sampling.readers"):
        close_readers([_Closing("a", False, closed), _Closing("b", True, closed), _Closing("c", False, closed)])
    assert closed == ["a", "c"]
    assert [r.getMessage() for r in caplog.records] == ["closing reader b"]
