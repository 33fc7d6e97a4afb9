#!/usr/bin/env bash
# A one-node SLURM cluster for the SLURM test (tests/slurm/): Debian's slurm-wlm and munge, started here, stopped by
# PID. The node fakes the shape that profiles/slurm asks for (16 CPUs, 128 GB, one GPU on /dev/null) through
# SlurmdParameters=config_overrides, with two partitions, cpu and gpu. No accounting (slurmdbd): the status command
# is squeue, which needs MinJobAge >= 3x the status-check interval.
#
#   tests/slurm/cluster.sh start DIR   # writes DIR/slurm.conf, starts munged, slurmctld, slurmd; PIDs in DIR/*.pid
#   tests/slurm/cluster.sh stop DIR    # stops exactly the daemons that `start` recorded
#   tests/slurm/cluster.sh install     # apt-get install slurm-wlm munge (as root), unless already there
#
# Clients (sbatch, squeue, scontrol, sinfo) find the cluster through SLURM_CONF=DIR/slurm.conf. The srun inside a
# job does not: snakemake-executor-plugin-slurm-jobstep 0.6.1 removes every SLURM_* variable but the job's identity
# from the environment of its srun, SLURM_CONF included, so srun reads the default /etc/slurm/slurm.conf. `start`
# links that path to DIR/slurm.conf (refusing to replace a real file) and `stop` removes the link.
set -euo pipefail

install() {
    if command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v munged >/dev/null; then
        return 0
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends slurm-wlm munge >/dev/null
}

wait_for() {  # wait_for SECONDS DESCRIPTION COMMAND...
    local seconds=$1 what=$2
    shift 2
    for _ in $(seq $((seconds * 4))); do
        if "$@" >/dev/null 2>&1; then return 0; fi
        sleep 0.25
    done
    echo "cluster.sh: $what did not come up within ${seconds}s" >&2
    return 1
}

start() {
    local dir host
    dir=$(realpath "$1")
    host=$(hostname -s)
    mkdir -p "$dir"/{state,spool,log,munge}
    chmod 755 "$dir"  # munged runs as the munge user
    chown munge:munge "$dir/munge"
    # munged as the munge user, its socket in our folder (never the system's /run/munge)
    [ -s /etc/munge/munge.key ] || { mungekey --create >/dev/null 2>&1 || create-munge-key -f >/dev/null; chown munge:munge /etc/munge/munge.key; }
    runuser -u munge -- /usr/sbin/munged --foreground --socket="$dir/munge/munge.socket" \
        --pid-file="$dir/munge/munged.pid" --log-file="$dir/log/munged.log" --seed-file="$dir/munge/seed" 2>"$dir/log/munged.stderr" &
    echo $! >"$dir/munged.pid"
    wait_for 20 munged test -S "$dir/munge/munge.socket"

    cat >"$dir/slurm.conf" <<CONF
ClusterName=spurious-ci
SlurmctldHost=$host
SlurmUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.socket
CredType=cred/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
ReturnToService=2
SlurmctldPort=16817
SlurmdPort=16818
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.daemon.pid
SlurmdPidFile=$dir/slurmd.daemon.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MinJobAge=300
KillWait=10
SchedulerParameters=sched_interval=2
SlurmdParameters=config_overrides
GresTypes=gpu
NodeName=$host CPUs=16 RealMemory=128000 Gres=gpu:1 State=UNKNOWN
PartitionName=cpu Nodes=$host Default=YES MaxTime=INFINITE State=UP
PartitionName=gpu Nodes=$host MaxTime=INFINITE State=UP
CONF
    echo "Name=gpu File=/dev/null" >"$dir/gres.conf"
    if [ -e /etc/slurm/slurm.conf ] && [ ! -L /etc/slurm/slurm.conf ]; then
        echo "cluster.sh: /etc/slurm/slurm.conf exists (a real cluster?): not replacing it" >&2
        return 1
    fi
    mkdir -p /etc/slurm
    ln -sfn "$dir/slurm.conf" /etc/slurm/slurm.conf
    export SLURM_CONF="$dir/slurm.conf"
    /usr/sbin/slurmctld -D -i -f "$dir/slurm.conf" 2>"$dir/log/slurmctld.stderr" &
    echo $! >"$dir/slurmctld.pid"
    wait_for 30 slurmctld scontrol ping
    /usr/sbin/slurmd -D -f "$dir/slurm.conf" 2>"$dir/log/slurmd.stderr" &
    echo $! >"$dir/slurmd.pid"
    wait_for 30 "the node" bash -c "sinfo -h -N -o %T | grep -qx idle"
    sinfo -N -o "%N %P %c %m %G %T"
}

stop() {
    local dir pid
    dir=$(realpath "$1")
    # the jobs first (their slurmstepd and processes belong to slurmd, not to us), then the daemons
    if [ -f "$dir/slurmctld.pid" ]; then
        SLURM_CONF="$dir/slurm.conf" scancel --user="$(id -un)" 2>/dev/null || true
        for _ in $(seq 40); do
            [ -z "$(SLURM_CONF="$dir/slurm.conf" squeue -h -t R,PD,CG 2>/dev/null)" ] && break
            sleep 0.25
        done
    fi
    for name in slurmd slurmctld munged; do
        [ -f "$dir/$name.pid" ] || continue
        pid=$(cat "$dir/$name.pid")
        kill -TERM "$pid" 2>/dev/null || true
        for _ in $(seq 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
        kill -KILL "$pid" 2>/dev/null || true
        rm -f "$dir/$name.pid"
    done
    if [ "$(readlink /etc/slurm/slurm.conf 2>/dev/null)" = "$dir/slurm.conf" ]; then rm -f /etc/slurm/slurm.conf; fi
}

case "${1:-}" in
    install) install ;;
    start) start "${2:?usage: cluster.sh start DIR}" ;;
    stop) stop "${2:?usage: cluster.sh stop DIR}" ;;
    *) echo "usage: cluster.sh install | start DIR | stop DIR" >&2; exit 2 ;;
esac
