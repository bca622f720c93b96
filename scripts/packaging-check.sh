#!/bin/bash
# How the product is installed and read, checked on the CI machine (.ci/run calls this after the unit
# tests): the man pages as pip installed them, the docs site (mkdocs --strict) and its runnable
# examples, the shipped Prometheus rules (promtool check + test), the Debian package (built with
# Debian's tooling, installed/upgraded/purged with apt in a fresh Debian 12 root) and the RPM spec.
#   bash scripts/packaging-check.sh [PART...]    PART: man docs rules deb rpm (default: all)
# Prints each part's time. Exits non-zero if any part failed.
set -uo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
VENV=${VENV:-/opt/slurm-energy/venv}
PY=${PY:-/opt/slurm-energy/venv/bin/python}  # the tools (argparse-manpage, mkdocs) live in the CI venv
PARTS=${*:-man docs rules deb rpm}
rc=0
log() { echo "[packaging] $*"; }

part_man() {
  # the pages pip installed (pyproject's data-files) are found by man for the venv's bin on PATH
  local page
  for page in jobenergy slurm-energy; do
    [ -f "$VENV/share/man/man1/$page.1" ] || { log "no $VENV/share/man/man1/$page.1 (pip install did not install it)"; return 1; }
    local found; found=$(PATH="$VENV/bin:$PATH" man -w "$page" 2>&1)
    [ "$found" = "$VENV/share/man/man1/$page.1" ] || { log "man -w $page: '$found', expected the venv's page"; return 1; }
    cmp -s "$VENV/share/man/man1/$page.1" "man/$page.1" || { log "$page.1 installed differs from man/$page.1 (venv not from this checkout?)"; return 1; }
  done
  "$PY" scripts/man.py check
}

part_docs() {
  # the site, strict: a broken link or anchor, or a page the nav names but that is missing, fails
  local out; out=$(mktemp -d)
  NO_MKDOCS_2_WARNING=1 "$(dirname "$PY")/mkdocs" build --strict -q -d "$out/site" || { rm -rf "$out"; return 1; }
  rm -rf "$out"
  # every ```console block marked <!-- runnable --> runs, and its output matches the page
  "$PY" scripts/docs-examples.py || return 1
  # the README's links into the repository point at files that exist
  local link bad=0
  for link in $(grep -oE '\]\((docs|scripts)/[^)#]+' README.md | cut -c3-); do
    [ -e "$link" ] || { log "README.md links to $link, which does not exist"; bad=1; }
  done
  [ $bad = 0 ] || return 1
  # no internal work-item numbers in the product's docs
  if grep -rnE -i '\bissues? *#?[0-9]+' README.md docs/ --include='*.md'; then
    log "internal issue numbers in the docs (above): say what the work was instead"; return 1
  fi
}

part_rules() {
  # Debian's prometheus package ships promtool (scripts/setup.sh installs it)
  command -v promtool >/dev/null || { log "no promtool (apt-get install prometheus)"; return 1; }
  promtool check rules prometheus/slurm-energy.rules.yml || return 1
  (cd prometheus && promtool test rules slurm-energy.rules.test.yml) || return 1
  # every recording rule the dashboard reads is one the rules file records
  "$PY" - <<'PY'
import json, re, sys
import yaml
rules = {r["record"] for g in yaml.safe_load(open("prometheus/slurm-energy.rules.yml"))["groups"] for r in g["rules"] if "record" in r}
dash = json.load(open("dashboards/slurm-energy.json"))
used = {n for p in dash["panels"] for t in p.get("targets", []) for n in re.findall(r"\b\w+:\w+:\w+\b", t["expr"])}
missing = sorted(used - rules)
print(f"[packaging] dashboard reads {len(used)} recording rule(s); missing from the rules file: {missing or 'none'}")
sys.exit(1 if missing or not used else 0)
PY
}

part_deb() {
  # build with dpkg-buildpackage + dh-virtualenv, then install/upgrade/purge it with apt in a fresh
  # Debian 12 root (packaging/test-deb.sh; the base root is debootstrapped once and cached)
  local out; out=$(mktemp -d /var/tmp/slurm-energy-dist.XXXXXX)
  OUT=$out bash packaging/build-deb.sh || { rm -rf "$out"; return 1; }
  DEB=$(ls "$out"/slurm-energy_*.deb)
  log "$(basename "$DEB"): $(du -h "$DEB" | cut -f1)"
  bash packaging/test-deb.sh "$DEB"; local r=$?
  [ $r = 0 ] && cp "$DEB" "$REPO/dist/" 2>/dev/null || true
  rm -rf "$out"; return $r
}

part_rpm() {
  # rpmbuild the spec; its file list against the .deb's (built by part_deb, else built here)
  local out; out=$(mktemp -d /var/tmp/slurm-energy-dist.XXXXXX)
  OUT=$out bash packaging/build-rpm.sh || { rm -rf "$out"; return 1; }
  local deb; deb=$(ls "$REPO"/dist/slurm-energy_*.deb 2>/dev/null | tail -1)
  [ -n "$deb" ] || { OUT="$REPO/dist" bash packaging/build-deb.sh >/dev/null && deb=$(ls "$REPO"/dist/slurm-energy_*.deb | tail -1); }
  python3 packaging/compare-filelists.py "$deb" "$(ls "$out"/*.rpm)"; local r=$?
  rm -rf "$out"; return $r
}

mkdir -p "$REPO/dist"
for p in $PARTS; do
  t=$(date +%s)
  if declare -F "part_$p" >/dev/null; then "part_$p"; r=$?; else log "unknown part $p"; r=2; fi
  log "$p: rc=$r, $(( $(date +%s) - t )) s"
  [ $r = 0 ] || rc=1
done
exit $rc
