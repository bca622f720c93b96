#!/bin/bash
# Install, upgrade and purge the Debian package with apt in a fresh Debian 12 root (as root).
#   bash packaging/test-deb.sh dist/slurm-energy_0.1.0-1_amd64.deb
# The root: debootstrap bookworm (minbase + systemd, man-db), built once and cached under
# $CACHE/bookworm (default /var/cache/slurm-energy/pkgtest), copied fresh for each run and mounted
# like the test clusters' roots (scripts/slurm-root.sh mount/umount). The "previous build" is the same
# .deb repacked one version lower (dpkg-deb -R, Version 0.1.0-0), so the upgrade path dpkg takes --
# conffile kept, maintainer scripts of both -- is the real one. Checks, in order:
#   1. apt installs it (dependencies from Debian's archive); hooks in place; `slurm-energy install
#      --print` prints the slurm.conf lines; site.yaml is a conffile; `man jobenergy` works;
#      `systemd-analyze verify` passes on the four units; their hardening settings are there;
#   2. a store at the previous schema version (the first N-1 of the product's own migrations) and an
#      edited site.yaml survive the upgrade; the store is migrated to this version's schema;
#   3. `dpkg --purge` removes the hooks, units, venv, spool and logs and keeps the store;
#      with SLURM_ENERGY_PURGE_STORE=yes the store goes too.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
DEB=$(readlink -f "$1")
CACHE=${CACHE:-/var/cache/slurm-energy/pkgtest}
MIRROR=${MIRROR:-$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)}
MIRROR=${MIRROR:-http://deb.debian.org/debian}
BASE=$CACHE/bookworm
log() { echo "[test-deb] $*" >&2; }
fail() { log "FAIL: $*"; exit 1; }
[ "$(id -u)" = 0 ] || fail "must run as root"
[ -f "$DEB" ] || fail "no package $1"

if [ ! -f "$BASE/.pkgtest-done" ]; then
  command -v debootstrap >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
  t=$(date +%s); rm -rf "$BASE" "$BASE.new"; mkdir -p "$CACHE"
  log "debootstrap bookworm into $BASE (once; mirror $MIRROR)"
  debootstrap --variant=minbase --include=ca-certificates,systemd,man-db bookworm "$BASE.new" "$MIRROR" \
    >"$CACHE/debootstrap.log" 2>&1 || { tail -20 "$CACHE/debootstrap.log"; fail "debootstrap"; }
  printf '#!/bin/sh\nexit 101\n' >"$BASE.new/usr/sbin/policy-rc.d"; chmod 755 "$BASE.new/usr/sbin/policy-rc.d"
  mv "$BASE.new" "$BASE"; touch "$BASE/.pkgtest-done"
  log "base root: $(( $(date +%s) - t )) s"
fi

T=$(mktemp -d /var/tmp/slurm-energy-pkgtest.XXXXXX)
R=$T/root
cleanup() { CACHE=$T bash "$REPO/scripts/slurm-root.sh" umount root >/dev/null 2>&1 || true; rm -rf "$T"; }
trap cleanup EXIT
cp -a "$BASE" "$R"
cp /etc/resolv.conf "$R/etc/resolv.conf"
CACHE=$T bash "$REPO/scripts/slurm-root.sh" mount root
in_root() { chroot "$R" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LC_ALL=C.UTF-8 DEBIAN_FRONTEND=noninteractive "$@"; }

# the previous build: this one repacked as version 0.1.0-0
mkdir -p "$R/tmp/debs" "$T/prev"
cp "$DEB" "$R/tmp/debs/new.deb"
dpkg-deb -R "$DEB" "$T/prev"
sed -i 's/^Version: .*/Version: 0.1.0-0/' "$T/prev/DEBIAN/control"
dpkg-deb -b -Zgzip -z1 "$T/prev" "$R/tmp/debs/prev.deb" >/dev/null

t=$(date +%s)
in_root apt-get update -qq >/dev/null
in_root apt-get install -y -q --no-install-recommends /tmp/debs/prev.deb >"$T/apt1.log" 2>&1 \
  || { tail -30 "$T/apt1.log"; fail "apt-get install of the previous build"; }
log "1. apt-get install (previous build, dependencies included): $(( $(date +%s) - t )) s"

check_installed() {
  local f out
  for f in prolog epilog mail; do
    [ -x "$R/etc/slurm-energy/hooks/$f" ] || fail "hook $f not in /etc/slurm-energy/hooks"
  done
  grep -q '^PY=/opt/venvs/slurm-energy/bin/python$' "$R/etc/slurm-energy/hooks/prolog" || fail "the prolog does not run the package's python"
  out=$(in_root slurm-energy install --print 2>/dev/null) || fail "slurm-energy install --print refused the package's hooks"
  for f in "Prolog=/etc/slurm-energy/hooks/prolog" "Epilog=/etc/slurm-energy/hooks/epilog" \
           "PrologFlags=Alloc,Contain" "MailProg=/etc/slurm-energy/hooks/mail"; do
    grep -qx "$f" <<<"$out" || fail "install --print lacks '$f'"
  done
  in_root dpkg-query -W -f='${Conffiles}\n' slurm-energy | grep -q '^ /etc/slurm-energy/site.yaml ' \
    || fail "/etc/slurm-energy/site.yaml is not a conffile"
  [ "$(in_root man -w jobenergy)" = /usr/share/man/man1/jobenergy.1.gz ] || fail "man -w jobenergy"
  in_root man -w slurm-energy >/dev/null || fail "man -w slurm-energy"
  in_root jobenergy --help >/dev/null || fail "jobenergy --help"
  local units=(slurm-energy-collect.service slurm-energy-collect.timer slurm-energy-prune.service slurm-energy-prune.timer)
  for f in "${units[@]}"; do [ -f "$R/lib/systemd/system/$f" ] || fail "unit $f not installed"; done
  in_root systemd-analyze verify "${units[@]/#//lib/systemd/system/}" || fail "systemd-analyze verify"
  for f in ProtectSystem=full ProtectHome= NoNewPrivileges=yes CapabilityBoundingSet=CAP_; do
    grep -q "^$f" "$R/lib/systemd/system/slurm-energy-collect.service" || fail "collect unit lacks $f"
  done
  # systemd's own exposure score (0 = locked down, 10 = unprotected): at most 4.0 ("OK") for both
  local sec; sec=$(in_root systemd-analyze security --offline=yes /lib/systemd/system/slurm-energy-collect.service \
    /lib/systemd/system/slurm-energy-prune.service 2>/dev/null | grep 'Overall exposure level') || fail "systemd-analyze security"
  echo "$sec" >&2
  awk '{v=$(NF-2)+0; if (v > 4.0) bad=1} END {exit bad}' <<<"$sec" || fail "a unit's exposure level is above 4.0"
}
check_installed
log "1. hooks, install --print, conffile, man pages, systemd-analyze verify: ok"

# 2. a store as the previous release left it (schema N-1, one job), an admin's edit of site.yaml
in_root /opt/venvs/slurm-energy/bin/python -I - <<'PY' || fail "making a previous-version store"
from slurm_energy.store import schema
from slurm_energy.store.db import connect
N = schema.SCHEMA_VERSION
schema.SCHEMA_VERSION = N - 1  # the release before: its migrations were the first N-1 of this list
db = connect("sqlite:////var/lib/slurm-energy/jobs.db")
schema.migrate(db)
with db.transaction():
    db.execute("INSERT INTO job_records (id, cluster, job_id, start_time, end_time, status, updated_at) "
               "VALUES (1, 'c1', '42', 1000, 4600, 'complete', 4600)")
    db.execute("INSERT INTO job_json (id, record_json) VALUES (1, '{}')")
print("store at schema version", schema.current_version(db))
PY
echo "cluster_name: pkgtest   # edited by the admin" >>"$R/etc/slurm-energy/site.yaml"
EDITED=$(sha256sum <"$R/etc/slurm-energy/site.yaml")
t=$(date +%s)
in_root apt-get install -y -q --no-install-recommends /tmp/debs/new.deb >"$T/apt2.log" 2>&1 \
  || { tail -30 "$T/apt2.log"; fail "apt-get upgrade to the new build"; }
grep -E 'slurm-energy: (store|hooks)' "$T/apt2.log" >&2 || true
log "2. upgrade 0.1.0-0 -> $(in_root dpkg-query -W -f='${Version}' slurm-energy): $(( $(date +%s) - t )) s"
[ "$(sha256sum <"$R/etc/slurm-energy/site.yaml")" = "$EDITED" ] || fail "the upgrade changed the edited site.yaml"
in_root /opt/venvs/slurm-energy/bin/python -I - <<'PY' || fail "store after the upgrade"
import sqlite3
from slurm_energy.store import schema
db = sqlite3.connect("file:/var/lib/slurm-energy/jobs.db?mode=ro", uri=True)
v = db.execute("SELECT max(version) FROM schema_version").fetchone()[0]
assert v == schema.SCHEMA_VERSION, f"schema version {v}, expected {schema.SCHEMA_VERSION}"
cols = {r[1] for r in db.execute("PRAGMA table_info(job_records)")}
assert "sluid" in cols, "the last migration's column is missing"
assert db.execute("SELECT job_id FROM job_records").fetchall() == [("42",)], "the job was lost"
print(f"store kept (job 42) and migrated to schema version {v}")
PY
check_installed
log "2. conffile kept, store kept and migrated, hooks rewritten: ok"

# 3. purge: what the package made goes, the store stays unless asked
in_root dpkg --purge slurm-energy >"$T/purge.log" 2>&1 || { cat "$T/purge.log"; fail "dpkg --purge"; }
for p in /opt/venvs/slurm-energy /etc/slurm-energy /var/spool/slurm-energy /var/log/slurm-energy \
         /lib/systemd/system/slurm-energy-collect.timer /usr/bin/jobenergy /usr/share/man/man1/jobenergy.1.gz; do
  [ ! -e "$R$p" ] || fail "$p left after dpkg --purge"
done
[ -f "$R/var/lib/slurm-energy/jobs.db" ] || fail "dpkg --purge removed the job store"
in_root apt-get install -y -q --no-install-recommends /tmp/debs/new.deb >"$T/apt3.log" 2>&1 || fail "reinstall"
chroot "$R" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin SLURM_ENERGY_PURGE_STORE=yes dpkg --purge slurm-energy >/dev/null 2>&1 \
  || fail "dpkg --purge with SLURM_ENERGY_PURGE_STORE=yes"
[ ! -e "$R/var/lib/slurm-energy" ] || fail "SLURM_ENERGY_PURGE_STORE=yes left /var/lib/slurm-energy"
log "3. purge removed what it made and kept the store; SLURM_ENERGY_PURGE_STORE=yes removed it: ok"
