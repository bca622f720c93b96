"""jobenergy says on stderr, in one line, why nothing is shown (an id with no record, an empty window
or filter) and flags records left running long after their last update; stdout keeps its shape."""

import pytest

from slurm_energy.cli import jobenergy as N
from slurm_energy.cli import jobenergy as je
from slurm_energy.jobid import parse_jobids
from slurm_energy.model import Status
from tests.helpers.jobrecord_factory import finished, node_record, run_jobenergy, store_with

T0 = 1_700_000_000.0  # 2023-11-14T22:13:20Z


run = run_jobenergy


@pytest.fixture
def url(tmp_path, site_config, monkeypatch):
    site_config.write(bare=True, cluster_name="c1", sampling={"interim_s": 30})
    return store_with(tmp_path,
                      finished(node_record(job_id="100", start=T0, end=T0 + 3600, user="alice", exit_code="0:0")),
                      finished(node_record(job_id="7", start=T0, end=T0 + 600, status=Status.RUNNING)))


def _where(url, tmp_path):
    return f"{url} (from --store; site config {tmp_path}/site.yaml)"


def test_empty_window_is_one_line_on_stderr_and_no_empty_table(url, tmp_path, capsys):
    rc, out, err = run(capsys, "--store", url, "-S", "2023-11-16", "-E", "2023-11-17")
    assert rc == 0 and out == ""  # sacct's exit status for an empty result; no header-only table
    assert err == (f"jobenergy: no jobs that ran between 2023-11-16T00:00:00 and 2023-11-17T00:00:00 in the "
                   f"store: {_where(url, tmp_path)}\n")


def test_empty_result_parsable_keeps_its_header_for_scripts(url, tmp_path, capsys):
    rc, out, err = run(capsys, "--store", url, "-P", "-o", "JobID,Status", "-S", "2023-11-16")
    assert rc == 0 and out == "JobID|Status\n"
    assert err.startswith("jobenergy: no jobs that ran between 2023-11-16T00:00:00 and now in the store: ")


def test_a_label_that_no_job_ran_is_named_and_no_epoch_date_is_suggested(url, tmp_path, capsys):
    """--label alone has no window (as -j): the line says which label found nothing, and suggests no
    `-S 1969-12-31` (the day before epoch 0) as an earlier start."""
    rc, out, err = run(capsys, "--store", url, "--label", "bert-small")
    assert rc == 0 and out == ""
    assert err == ("jobenergy: no jobs that ran between the first job and now with a track(label='bert-small') "
                   "block (a phase of that name; outside Slurm, the job's name) in the store: "
                   f"{_where(url, tmp_path)}\n")


def test_user_account_partition_and_state_filters_are_named(url, tmp_path, capsys):
    rc, out, err = run(capsys, "--store", url, "-S", "2023-11-14", "-u", "bob", "-A", "chem", "-r", "gpu",
                       "-s", "CD,partial")
    assert rc == 0 and out == ""
    assert err == (f"jobenergy: no jobs that ran between 2023-11-14T00:00:00 and now of user bob in account chem "
                   f"in partition gpu in state CD,partial in the store: {_where(url, tmp_path)}\n")


def test_default_window_says_it_is_today_and_gives_an_older_start(url, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(je.time, "time", lambda: T0 + 86400 * 10)  # 2023-11-24T22:13:20Z: nothing today
    rc, out, err = run(capsys, "--store", url)
    assert rc == 0 and out == ""
    assert err == (f"jobenergy: no jobs that ran between 2023-11-24T00:00:00 and now in the store: "
                   f"{_where(url, tmp_path)}. Without -j the window is today from midnight (as sacct): give -S "
                   "for older jobs, e.g. -S 2023-11-23\n")


def test_missing_id_for_an_ordinary_user_may_be_another_users_job():
    # alice sees only her own jobs: job 200 may exist as bob's; the line must neither say it is "not
    # in the store" (it may be) nor that it exists
    [line] = N.missing_ids(parse_jobids(["200"]), [], False, " among alice's jobs", "STORE", False, 60.0)
    assert line == ("job 200: no record among alice's jobs: STORE. It may be another user's job, which you cannot "
                    "see, or one not recorded yet: pending, started under 60 s ago, or ended and was not collected "
                    "(admins: slurm-energy collect)"
                    "; a job cancelled before it started never ran on a node and has none"
                    " (sacct -X -j 200 -o State,Start shows which)")
    assert "not in the store" not in line
    [line] = N.missing_ids(parse_jobids(["200"]), [], True, " among alice's jobs", "STORE", False, 60.0)
    assert line == ("job 200: no record among alice's jobs in the given -S/-E window or -s states: STORE. Try it "
                    "without -S/-E/-s; it may also be another user's job, which you cannot see")
    # root and admins see every job: there "not in the store" is the plain truth
    [line] = N.missing_ids(parse_jobids(["200"]), [], False, "", "STORE", True, 60.0)
    assert line == ("job 200: not in the store: STORE. No record yet if it is pending, started under 60 s ago, or "
                    "ended and was not collected (admins: slurm-energy collect)"
                    "; a job cancelled before it started never ran on a node and has none"
                    " (sacct -X -j 200 -o State,Start shows which)")


def test_missing_id_with_a_window_says_to_drop_it(url, tmp_path, capsys):
    rc, out, err = run(capsys, "--store", url, "-S", "2023-11-16", "100")
    assert rc == 1 and out == ""
    assert err == (f"jobenergy: job 100: not in the store in the given -S/-E window or -s states: "
                   f"{_where(url, tmp_path)}. Try it without -S/-E/-s\n")


def test_running_record_not_updated_for_10_interims_is_flagged(url, capsys, monkeypatch):
    # job 7's last update: T0 + 600; interim_s 30 (site.yaml) -> stale after 10 x 30 s = 300 s
    monkeypatch.setattr(je.time, "time", lambda: T0 + 600 + 300)  # exactly 300 s: not yet
    rc, out, err = run(capsys, "--store", url, "-P", "-n", "-o", "JobID,State,Status", "7")
    assert rc == 0 and out == "7|RUNNING|running\n" and err == ""  # the table is unchanged either way
    monkeypatch.setattr(je.time, "time", lambda: T0 + 600 + 3723)  # 1 h 2 min 3 s later
    rc, out, err = run(capsys, "--store", url, "-P", "-n", "-o", "JobID,State,Status", "7")
    assert rc == 0 and out == "7|RUNNING|running\n"
    assert err == ("jobenergy: note: job 7: its record says running but was last updated 2023-11-14T22:23:20, "
                   "01:02:03 ago (a running job's is updated every 30 s; stale after 10 x 30 s, "
                   "sampling.interim_s): ended per Slurm? (sacct -j 7) Its energy is shown up to then; admins: "
                   "run slurm-energy collect to finalise it\n")


def test_several_stale_records_are_one_note():
    recs = [finished(node_record(job_id=str(i), start=T0, end=T0 + i, status=Status.RUNNING)) for i in range(1, 8)]
    recs.append(finished(node_record(job_id="50", start=T0, end=T0 + 60)))  # complete: never flagged
    [line] = N.stale_running(recs, T0 + 1000, 60.0, lambda t: f"<{t - T0:g}>", lambda s: f"{s:g}s")
    assert line == ("note: jobs 1, 2, 3, 4, 5 and 2 more: their records say running but were last updated over "
                    "600s ago (oldest <1>; stale after 10 x 60 s, sampling.interim_s): ended per Slurm? (sacct -j "
                    "1,2,3,4,5) Their energy is shown up to then; admins: run slurm-energy collect to finalise them")
