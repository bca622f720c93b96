#!/bin/bash
# Build the RPM from packaging/rpm/slurm-energy.spec with rpmbuild (Debian's `rpm` package), from a
# tarball of the checkout's files. No RHEL root can be installed here: the RPM is built with the
# host's python3.11 and checked (file list against the .deb: packaging/compare-filelists.py), never
# installed. --nodeps: Debian's rpm database knows none of the BuildRequires.
#   bash packaging/build-rpm.sh        -> dist/slurm-energy-<version>-1.<arch>.rpm
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$REPO/dist}
command -v rpmbuild >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends rpm >/dev/null
V=$(sed -n 's/^Version: *//p' "$REPO/packaging/rpm/slurm-energy.spec")
W=$(mktemp -d /var/tmp/slurm-energy-rpm.XXXXXX)
trap 'rm -rf "$W"' EXIT
mkdir -p "$W"/{SOURCES,SPECS,BUILD,RPMS,SRPMS,src/slurm-energy-$V}
git -C "$REPO" ls-files -z --cached --others --exclude-standard | (cd "$REPO" && xargs -0 cp --parents -t "$W/src/slurm-energy-$V")
tar -C "$W/src" -czf "$W/SOURCES/slurm-energy-$V.tar.gz" "slurm-energy-$V"
cp "$REPO/packaging/rpm/slurm-energy.spec" "$W/SPECS/"
if ! rpmbuild --nodeps --define "_topdir $W" -bb "$W/SPECS/slurm-energy.spec" >"$W/build.log" 2>&1; then
  tail -40 "$W/build.log"; cp "$W/build.log" /var/tmp/slurm-energy-rpm-build.log; echo "[build-rpm] failed" >&2; exit 1
fi
mkdir -p "$OUT"
find "$W/RPMS" -name '*.rpm' -exec mv -t "$OUT" {} +
ls "$OUT"/*.rpm
