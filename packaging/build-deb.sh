#!/bin/bash
# Build the Debian package with Debian's own tooling: dpkg-buildpackage, debhelper (compat 13) and
# dh-virtualenv (the package and its PyPI dependencies in /opt/venvs/slurm-energy on Debian's
# python3). Works on a copy of the checkout's files (git ls-files), with packaging/debian as debian/.
#   bash packaging/build-deb.sh            -> dist/slurm-energy_<version>_<arch>.deb
#   OUT=DIR DEB_VERSION=0.1.0-2 bash packaging/build-deb.sh   (another directory / package version)
# Needs root for apt-get when a build tool is missing; pip reaches PyPI for the dependencies.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$REPO/dist}
log() { echo "[build-deb] $*" >&2; }

NEED=(dpkg-dev debhelper dh-virtualenv build-essential python3-dev python3-venv)
MISSING=()
for p in "${NEED[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || MISSING+=("$p")
done
if [ ${#MISSING[@]} -gt 0 ]; then
  log "apt-get install ${MISSING[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${MISSING[@]}" >/dev/null
fi

W=$(mktemp -d /var/tmp/slurm-energy-deb.XXXXXX)
trap 'rm -rf "$W"' EXIT
SRC=$W/slurm-energy
mkdir -p "$SRC"
git -C "$REPO" ls-files -z --cached --others --exclude-standard | (cd "$REPO" && xargs -0 cp --parents -t "$SRC")
cp -r "$REPO/packaging/debian" "$SRC/debian"
if [ -n "${DEB_VERSION:-}" ]; then
  sed -i "1s/([^)]*)/($DEB_VERSION)/" "$SRC/debian/changelog"
fi
log "dpkg-buildpackage $(head -1 "$SRC/debian/changelog" | cut -d' ' -f2) in $SRC (log $W/build.log)"
if ! (cd "$SRC" && dpkg-buildpackage -us -uc -b) >"$W/build.log" 2>&1; then
  tail -40 "$W/build.log"; cp "$W/build.log" /var/tmp/slurm-energy-deb-build.log; log "failed (log /var/tmp/slurm-energy-deb-build.log)"; exit 1
fi
mkdir -p "$OUT"
mv "$W"/*.deb "$OUT"/
ls "$OUT"/*.deb
