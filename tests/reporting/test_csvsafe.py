"""OWASP's CSV-injection rule on the cells a user writes (issue 22)."""

import pytest

from slurm_energy.reporting.csvsafe import safe_cell


@pytest.mark.parametrize("text", ["=1+2", "+1", "-2+3", "@SUM(A1)", "\t=1", "\r=1"])
def test_a_cell_a_spreadsheet_would_evaluate_gets_a_leading_quote(text):
    assert safe_cell(text) == "'" + text


@pytest.mark.parametrize("text", ["train", "epoch 1", "a=b", "", "'quoted"])
def test_other_text_is_unchanged(text):
    assert safe_cell(text) == text
