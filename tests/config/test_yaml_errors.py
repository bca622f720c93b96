"""A site.yaml that is not YAML: PyYAML's text, then one line 'FILE: line L, column C: what. Fix: ...'."""

import pytest

from slurm_energy.config import ConfigError, load_site_config


def _last_line(tmp_path, text: str) -> tuple[str, str]:
    p = tmp_path / "site.yaml"
    p.write_text(text)
    with pytest.raises(ConfigError) as ei:
        load_site_config(p)
    msg = str(ei.value)
    return str(p), msg.splitlines()[-1]


@pytest.mark.parametrize("text, expect", [
    # ' pue:' indented by 1 space under a top-level mapping whose keys start at column 1
    ("cluster_name: c1\npaths:\n  store_url: sqlite:////x.db\n pue: 1.2\n",
     "line 4, column 2: the indentation of line 4 matches no key above it. Fix: indent it exactly as far as "
     "the keys beside it (its siblings), or further under its parent key; use spaces only"),
    ("cluster_name: c1\nsampling:\n\tinterval_s: 5\n",
     "line 3, column 1: a tab character: YAML indents with spaces only. Fix: replace the tab(s) at the start "
     "of line 3 with spaces (2 per level, as in the documented example site.yaml)"),
    ("cluster_name: a: b\n",
     "line 1, column 16: a ':' where no key can start (two 'key: value' on one line, or a value containing "
     "': '). Fix: put each key on its own line, indented under its parent, or quote a value that contains "
     "': ' (e.g. note: \"a: b\")"),
    ("cluster_name: c1\npue 1.2\ntimezone: UTC\n",  # line 2 has no ':'; PyYAML notices on line 3
     "line 2, column 1: a line that is not 'key: value' (a missing ':', or a value continued on a line of its "
     "own). Fix: write 'key: value' (a space after the ':'), or quote a value that spans lines"),
    ("admins: [alice, bob\ncluster_name: c1\n",
     "line 2, column 13: the '[' list opened at line 1, column 9 is not closed. Fix: close it with ']' "
     "(items separated by ', ')"),
    ("location: {country: FR\ncluster_name: c1\n",
     "line 2, column 13: the '{' mapping opened at line 1, column 11 is not closed. Fix: close it with '}' "
     "(entries 'key: value' separated by ', ')"),
    ("cluster_name: \"c1\ntimezone: UTC\n",
     "line 3, column 1: the quoted text opened at line 1, column 15 is not closed. Fix: add the closing quote "
     "(the same kind, ' or \", as the opening one)"),
    ("cluster_name: c\x01\n",  # a control character: PyYAML's Reader refuses it before parsing
     "line 1, column 16: character #x0001 is not allowed in YAML (a control character). Fix: delete it, or "
     "save the file as plain UTF-8 text"),
])
def test_syntax_error_ends_with_position_what_and_fix(tmp_path, text, expect):
    p, last = _last_line(tmp_path, text)
    assert last == f"{p}: {expect}"


def test_pyyaml_text_kept_first_with_the_file_name(tmp_path):
    p = tmp_path / "site.yaml"
    p.write_text("cluster_name: c\x01\n")
    with pytest.raises(ConfigError) as ei:
        load_site_config(p)
    first, second = str(ei.value).splitlines()[:2]
    assert first == f"{p}: not valid YAML: unacceptable character #x0001: special characters are not allowed"
    assert second == f'  in "{p}", position 15'  # offset 15 (0-based) = line 1, column 16


def test_duplicate_key_keeps_its_own_fix_once(tmp_path):
    p = tmp_path / "site.yaml"
    p.write_text("pue: 1.2\npue: 1.3\n")
    with pytest.raises(ConfigError) as ei:
        load_site_config(p)
    assert str(ei.value).count("Fix:") == 1


def test_check_config_prints_the_fix_line_and_exits_1(tmp_path, capsys):
    from slurm_energy.cli.main import main

    p = tmp_path / "site.yaml"
    p.write_text("cluster_name: c1\nsampling:\n\tinterval_s: 5\n")
    assert main(["check-config", str(p), "--offline"]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "invalid site config:"
    assert err[-1].startswith(f"{p}: line 3, column 1: a tab character: YAML indents with spaces only. Fix: ")
