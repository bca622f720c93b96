"""A share filled by a fallback rule (the job never read on a node, or its last stretch unobserved)
is said in the report's headline, beside the totals, not only in the per-device flags."""

import html
import re

from slurm_energy.reporting.report import render_html
from tests.helpers.jobrecord_factory import device, finished, job_record


def _headline(page):
    return page[:page.index("<h2>Job</h2>")]


def test_never_observed_job_says_so_in_the_headline():
    rec = finished(job_record(devices=[device("cpu", 360.0, flags=["job_never_observed", "tail_estimated"]),
                                       device("ram", None, flags=["job_never_observed"])]))
    head = re.sub(r"\s+", " ", html.unescape(_headline(render_html(rec))))
    assert "Share not measured:" in head
    assert "the job's processes were never read on n1; its CPU share is a fallback" in head
    assert "its RAM share is a fallback" in head
    assert "the job's last stretch on n1 was not observed; its CPU share there is estimated" in head


def test_a_measured_share_has_no_such_line():
    rec = finished(job_record(devices=[device("cpu", 0.0), device("ram", 1.0)]))
    assert "Share not measured" not in render_html(rec)
