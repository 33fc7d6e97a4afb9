#!/usr/bin/env bash
# `make test-slurm`: installs Debian's slurm-wlm and munge (as root) when missing, starts a one-node cluster shaped
# like profiles/slurm (tests/slurm/cluster.sh), runs tests/slurm against it and stops every daemon it started, by PID,
# whatever happens. The failure mode under test is a hang, so everything runs under one hard limit (8 minutes).
set -euo pipefail
cd "$(dirname "$0")/../.."
LIMIT_S=${SLURM_TEST_LIMIT_S:-480}
started=$(date +%s)
dir=$(mktemp -d /tmp/spurious-slurm.XXXXXX)
cleanup() {
    tests/slurm/cluster.sh stop "$dir" || true
    rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 143' INT TERM
tests/slurm/cluster.sh install
tests/slurm/cluster.sh start "$dir"
export SLURM_CONF="$dir/slurm.conf" SPURIOUS_SLURM_CLUSTER="$dir"
left=$((LIMIT_S - ($(date +%s) - started)))
echo "SLURM cluster up in $(($(date +%s) - started)) s; tests/slurm gets the remaining ${left} s"
# timeout signals the whole process group: pytest, its snakemake runs and their children
rc=0
timeout -k 10 "$left" .venv/bin/pytest -q -p no:cacheprovider tests/slurm "$@" || rc=$?
echo "make test-slurm: $(($(date +%s) - started)) s in all (limit ${LIMIT_S} s)"
if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then echo "make test-slurm: HUNG past ${LIMIT_S} s" >&2; fi
exit "$rc"
