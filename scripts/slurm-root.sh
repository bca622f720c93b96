#!/bin/bash
# A newer Slurm than the host packages, in a Debian root built with debootstrap and cached under
# $CACHE (default /var/cache/slurm-energy/<suite>): Slurm, munge, MariaDB + slurmdbd and Python from
# that suite, slurm-energy in a venv inside the root (/opt/slurm-energy/venv, that root's Python).
# scripts/testcluster.sh uses it for `start --slurm 24.11|26.05`; see /work/shared/reference/slurm-chroot.
#
#   slurm-root.sh suite VERSION        print the Debian suite that packages Slurm VERSION (24.11, 26.05)
#   slurm-root.sh build SUITE          debootstrap + apt (cached: redone only when missing) and the venv
#   slurm-root.sh venv SUITE           (re)install this checkout into the root's venv
#   slurm-root.sh mount SUITE DIR...   bind /proc, /sys (rslave: cgroup v1 mounts come along), /dev,
#                                      /dev/pts, /dev/shm, and each DIR at the same path inside
#   slurm-root.sh umount SUITE         unmount everything under the root (fails loudly if it cannot)
#   slurm-root.sh exec SUITE [-u USER] [-C DIR] -- CMD...   run CMD in the root (as USER, in DIR)
#
# Knobs: CACHE=/var/cache/slurm-energy  MIRROR=<the host's Debian mirror>
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${CACHE:-/var/cache/slurm-energy}
RVENV=/opt/slurm-energy/venv
PKGS="slurmctld slurmd slurm-client slurmdbd munge mariadb-server mariadb-client python3 python3-venv procps"
log() { echo "[slurm-root] $*" >&2; }
die() { log "FATAL: $*"; exit 1; }

suite_of() {
  case "$1" in
    24.11) echo trixie ;;
    26.05) echo sid ;;
    *) die "no Debian suite known for Slurm $1 (24.11: trixie, 26.05: sid; 22.05 is the host's)" ;;
  esac
}

root_of() { echo "$CACHE/$1"; }

mirror() {
  [ -n "${MIRROR:-}" ] && { echo "$MIRROR"; return; }
  local m
  m=$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
  [ -n "$m" ] || m=$(awk '$1=="deb" && $3 ~ /^(bookworm|trixie|sid)$/ {print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
  echo "${m:-http://deb.debian.org/debian}"
}

now() { date +%s.%N; }
since() { awk -v a="$(now)" -v b="$1" 'BEGIN{printf "%.0f", a-b}'; }

cmd_build() {
  local S=$1 R; R=$(root_of "$S")
  [ "$(id -u)" = 0 ] || die "must run as root"
  mkdir -p "$CACHE"; chmod 755 "$CACHE"
  if [ ! -f "$R/.debootstrap-done" ]; then
    command -v debootstrap >/dev/null || { log "apt-get install debootstrap"
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null; }
    local t; t=$(now)
    rm -rf "$R"
    log "debootstrap $S into $R (mirror $(mirror)) ..."
    debootstrap --variant=minbase --include=ca-certificates "$S" "$R" "$(mirror)" >"$CACHE/debootstrap-$S.log" 2>&1 \
      || { tail -20 "$CACHE/debootstrap-$S.log"; die "debootstrap $S failed (log $CACHE/debootstrap-$S.log)"; }
    touch "$R/.debootstrap-done"
    log "debootstrap $S: $(since "$t") s"
  fi
  if [ "$(cat "$R/.apt-done" 2>/dev/null)" != "$PKGS" ]; then
    local t; t=$(now)
    # maintainer scripts must not start daemons; sid's Release file may be past Valid-Until
    printf '#!/bin/sh\nexit 101\n' >"$R/usr/sbin/policy-rc.d"; chmod 755 "$R/usr/sbin/policy-rc.d"
    echo 'Acquire::Check-Valid-Until "false";' >"$R/etc/apt/apt.conf.d/99no-valid-until"
    cp /etc/resolv.conf "$R/etc/resolv.conf" 2>/dev/null || true
    cmd_mount "$S"
    log "apt-get install $PKGS (in $S) ..."
    if ! chroot "$R" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive LC_ALL=C \
         bash -c "apt-get update -q && apt-get install -y -q --no-install-recommends $PKGS" >"$CACHE/apt-$S.log" 2>&1; then
      cmd_umount "$S"; tail -20 "$CACHE/apt-$S.log"; die "apt-get in the $S root failed (log $CACHE/apt-$S.log)"
    fi
    chroot "$R" apt-get clean
    cmd_umount "$S"
    echo "$PKGS" >"$R/.apt-done"
    log "apt $S: $(since "$t") s"
  fi
  cmd_venv "$S"
}

cmd_venv() {
  local S=$1 R t; R=$(root_of "$S"); t=$(now)
  [ -f "$R/.apt-done" ] || die "root $R not built: run $0 build $S"
  cp /etc/resolv.conf "$R/etc/resolv.conf" 2>/dev/null || true
  # the CAs this host trusts locally (a site proxy's, say) are trusted in the root too, for pip
  if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
    cp /usr/local/share/ca-certificates/*.crt "$R/usr/local/share/ca-certificates/"
    chroot "$R" update-ca-certificates >/dev/null 2>&1 || log "update-ca-certificates failed in the $S root"
  fi
  if [ ! -x "$R$RVENV/bin/python" ]; then
    log "creating $RVENV in the $S root"
    chroot "$R" /usr/bin/python3 -m venv "$RVENV"
    chroot "$R" env -i PATH=/usr/bin:/bin HOME=/root PIP_CERT=/etc/ssl/certs/ca-certificates.crt "$RVENV/bin/pip" install -q -U pip >"$CACHE/pip-$S.log" 2>&1 \
      || { tail -20 "$CACHE/pip-$S.log"; die "pip upgrade in the $S root failed"; }
  fi
  # skipped when the checkout's files are those installed last time
  local h; h=$(cd "$REPO" && git ls-files -z --cached --others --exclude-standard | xargs -0 sha256sum 2>/dev/null | sha256sum | cut -c1-16)
  if [ "$(cat "$R/opt/slurm-energy/.src-hash" 2>/dev/null)" = "$h" ]; then
    log "venv $S: slurm-energy from this checkout already installed"; return 0
  fi
  # a copy of the checkout (tracked and untracked-not-ignored files), as scripts/setup.sh does
  local B=/tmp/slurm-energy-src
  rm -rf "$R$B"; mkdir -p "$R$B"
  git -C "$REPO" ls-files -z --cached --others --exclude-standard \
    | (cd "$REPO" && xargs -0 cp --parents -t "$R$B" 2>/dev/null || true)
  log "pip install $REPO[demo] into the $S root's $RVENV ..."
  chroot "$R" env -i PATH=/usr/bin:/bin HOME=/root PIP_CERT=/etc/ssl/certs/ca-certificates.crt "$RVENV/bin/pip" install -q "$B[demo]" >"$CACHE/pip-$S.log" 2>&1 \
    || { tail -30 "$CACHE/pip-$S.log"; die "pip install in the $S root failed (log $CACHE/pip-$S.log)"; }
  rm -rf "$R$B"
  chroot "$R" "$RVENV/bin/python" -I -c "import slurm_energy, sys; print('[slurm-root] slurm_energy', slurm_energy.__version__, 'python', sys.version.split()[0])" >&2
  chmod -R a+rX "$R/opt/slurm-energy"
  echo "$h" >"$R/opt/slurm-energy/.src-hash"
  log "venv $S: $(since "$t") s"
}

# mount SUITE [DIR...]: idempotent
cmd_mount() {
  local S=$1 R d; R=$(root_of "$S"); shift
  mountpoint -q "$R/proc" || mount -t proc proc "$R/proc"
  mountpoint -q "$R/sys" || { mount --rbind /sys "$R/sys"; mount --make-rslave "$R/sys"; }
  mountpoint -q "$R/dev" || mount --bind /dev "$R/dev"
  mountpoint -q "$R/dev/pts" || mount --bind /dev/pts "$R/dev/pts"
  if [ -d /dev/shm ] && ! mountpoint -q "$R/dev/shm"; then mount --bind /dev/shm "$R/dev/shm"; fi
  for d in "$@"; do
    mkdir -p "$R$d"
    mountpoint -q "$R$d" || mount --bind "$d" "$R$d"
  done
}

# umount SUITE: every mount below the root, deepest first; exit 1 if any is left
cmd_umount() {
  local S=$1 R m left; R=$(root_of "$S")
  # /proc/self/mountinfo field 5 is the mount point; deepest first
  for m in $(awk -v r="$R/" 'index($5, r) == 1 {print $5}' /proc/self/mountinfo | sort -r); do
    mountpoint -q "$m" && { umount -R "$m" 2>/dev/null || umount -R "$m" 2>/dev/null || log "cannot unmount $m"; }
  done
  left=$(awk -v r="$R/" 'index($5, r) == 1 {print $5}' /proc/self/mountinfo)
  [ -z "$left" ] || { log "still mounted: $left"; return 1; }
}

# exec SUITE [-u USER] [-C DIR] [-e VAR=VAL]... -- CMD...: a clean environment like a login's
cmd_exec() {
  local S=$1 R user=root dir=/ envs=(); R=$(root_of "$S"); shift
  while [ $# -gt 0 ]; do
    case "$1" in
      -u) user=$2; shift 2 ;;
      -C) dir=$2; shift 2 ;;
      -e) envs+=("$2"); shift 2 ;;
      --) shift; break ;;
      *) break ;;
    esac
  done
  local home; home=$(chroot "$R" getent passwd "$user" | cut -d: -f6)
  local spec=(); [ "$user" = root ] || spec=(--userspec="$user:$(chroot "$R" id -gn "$user")")
  exec chroot "${spec[@]}" "$R" /usr/bin/env -i -C "$dir" PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin \
    HOME="${home:-/}" USER="$user" LANG=C.UTF-8 "${envs[@]}" "$@"
}

case "${1:-}" in
  suite) suite_of "$2" ;;
  root) root_of "$2" ;;
  build) cmd_build "$2" ;;
  venv) cmd_venv "$2" ;;
  mount) shift; cmd_mount "$@" ;;
  umount) cmd_umount "$2" ;;
  exec) shift; cmd_exec "$@" ;;
  *) echo "usage: $0 {suite VERSION|root SUITE|build SUITE|venv SUITE|mount SUITE [DIR...]|umount SUITE|exec SUITE [-u USER] [-C DIR] -- CMD...}" >&2; exit 2 ;;
esac
