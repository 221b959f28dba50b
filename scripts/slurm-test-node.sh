#!/usr/bin/env bash
# A single-node Slurm on this machine, for the tests that run ceiling under srun
# (tests/test_profile_srun.py): Debian's Slurm (slurmctld and slurmd, munge for their
# authentication) installed when run as root with apt, one node named after
# `hostname -s` with this machine's CPUs and memory in one partition, and the three
# daemons started in the background (no systemd: CI and containers have none as PID 1).
# Waits (at most 60 s) until `srun -n 1 true` answers and says so in one line.
#
# Exit 0 with "skipped, because ..." when it cannot (not root, no apt, the install or
# the daemons failed, a slurm.conf this script did not write): the srun tests then
# skip with their reason. Run again with Slurm answering, it does nothing. A Slurm
# this script did not set up is left alone; daemons it started that never answered
# are stopped again. With --install-only it installs the packages and stops there
# (.ci/run does so beside the build).
#
# For a container or VM: processes are tracked by their parent (proctrack/linuxproc),
# tasks are not bound (task/none), nothing needs cgroups. slurmctld runs as root.
# Debian's PMIx plugin (srun --mpi=pmix, what Open MPI needs) dlopens the unversioned
# libpmix.so, which only libpmix-dev ships: it is installed here too.
set -u
me=slurm-test-node
conf=/etc/slurm/slurm.conf
mark="# written by ceiling's scripts/slurm-test-node.sh"
t0=$(date +%s)

skip() { echo "$me: skipped, because $*"; exit 0; }

answers() {  # srun starts a one-task job step within $1 seconds (without a slurm.conf
    # to read, srun would retry for a minute)
    command -v srun >/dev/null 2>&1 && [ -e "${SLURM_CONF:-$conf}" ] \
        && timeout -k 2 "$1" srun -n 1 -t 1 true >/dev/null 2>&1
}

say_up() {
    echo "$me: Slurm $(sinfo -V 2>/dev/null | awk '{print $2}') answers: node $(sinfo -h -N -o '%N, %c CPUs, %m MiB, %T' 2>/dev/null | head -1)," \
         "srun --mpi=$(srun --mpi=list 2>&1 | awk '/^[[:space:]]*(cray|none|pmi|pmix)/ {printf "%s%s", s, $1; s="|"}')$1"
}

running() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }
ours() { [ -e "$conf" ] && grep -qF "$mark" "$conf"; }
install_only=
[ "${1:-}" = --install-only ] && install_only=1

# Already up (this script's earlier run, or a site's Slurm): nothing to do. (Our own
# slurm.conf without our slurmctld running would only keep srun retrying for 9 s.)
if [ -z "$install_only" ] && { ! ours || running /run/slurm/slurmctld.pid; } && answers 20; then
    say_up " (already running)"
    exit 0
fi

[ "$(id -u)" = 0 ] || skip "it needs root (to install and start Slurm) and srun does not answer here"
[ -f /etc/debian_version ] && command -v apt-get >/dev/null 2>&1 \
    || skip "it installs Debian's Slurm with apt-get, and this is not Debian with apt"
if [ -e "$conf" ] && ! ours; then
    skip "$conf exists and was not written by this script (a site's Slurm is left alone), and srun does not answer"
fi

# --- install ---------------------------------------------------------------------------
pkgs="slurmctld slurmd slurm-client munge libpmix-dev"
# shellcheck disable=SC2086
missing=$(for p in $pkgs; do dpkg -s "$p" >/dev/null 2>&1 || echo "$p"; done)
if [ -n "$missing" ]; then
    log=$(mktemp "${TMPDIR:-/tmp}/$me.XXXXXX")
    # the packages' scripts must not start the daemons (without a slurm.conf they would
    # fail, and fail the install): Debian's container images already forbid it so, a
    # machine without that rule gets it for the install only
    policy=/usr/sbin/policy-rc.d made=
    if [ ! -e "$policy" ]; then
        printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 755 "$policy" && made=1 && trap 'rm -f "$policy"' EXIT
    fi
    # shellcheck disable=SC2086
    if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >"$log" 2>&1; then
        # shellcheck disable=SC2086
        (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing) >"$log" 2>&1 \
            || { tail -n 5 "$log" | sed "s/^/$me: /"; rm -f "$log"; skip "apt-get could not install $(echo $missing)"; }
    fi
    rm -f "$log"
    if [ -n "$made" ]; then rm -f "$policy"; trap - EXIT; fi
    # a machine booted by systemd would otherwise start these daemons, with this test
    # configuration, at its next boot
    if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
        systemctl disable --quiet slurmctld slurmd 2>/dev/null || true
    fi
fi
for b in munged slurmctld slurmd srun sinfo scontrol; do
    command -v "$b" >/dev/null 2>&1 || [ -x "/usr/sbin/$b" ] || skip "$b is missing after the install"
done
if [ -n "$install_only" ]; then echo "$me: Slurm's packages are installed"; exit 0; fi

# --- slurm.conf ------------------------------------------------------------------------
host=$(hostname -s)
cpus=$(nproc)
# the tests start two ranks: a one-CPU machine is declared with two (slurmd is told to
# take the configuration as given, below)
[ "$cpus" -ge 2 ] || cpus=2
mem=$(awk '/^MemTotal:/ {print int($2 / 1024)}' /proc/meminfo)
# slurmctld and slurmd must reach each other by the node's name: where it does not
# resolve, its address is given as the loopback
addr=$(getent ahostsv4 "$host" | awk '{print $1; exit}')   # Debian's Slurm 22.05 speaks IPv4 only
[ -n "$addr" ] || addr=127.0.0.1
mkdir -p /etc/slurm /var/lib/slurm/slurmctld /var/lib/slurm/slurmd /var/log/slurm /run/slurm
new=$(mktemp "${TMPDIR:-/tmp}/$me.conf.XXXXXX")
cat >"$new" <<EOF
$mark
# One node, one partition, for ceiling's srun tests; the daemons are started by that script.
ClusterName=ceiling-test
SlurmctldHost=$host($addr)
SlurmUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=pmi2
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
ReturnToService=2
SchedulerType=sched/builtin
StateSaveLocation=/var/lib/slurm/slurmctld
SlurmdSpoolDir=/var/lib/slurm/slurmd
SlurmctldPidFile=/run/slurm/slurmctld.pid
SlurmdPidFile=/run/slurm/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
SlurmctldTimeout=30
SlurmdTimeout=60
InactiveLimit=0
MinJobAge=60
KillWait=5
NodeName=$host NodeAddr=$addr CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
EOF
if cmp -s "$new" "$conf"; then rm -f "$new"; else mv "$new" "$conf"; chmod 644 "$conf"; fi

# --- munge -----------------------------------------------------------------------------
started=()
if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
    if [ ! -s /etc/munge/munge.key ]; then
        mkdir -p /etc/munge
        { mungekey --create --keyfile=/etc/munge/munge.key 2>/dev/null \
          || dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 2>/dev/null; } \
          || skip "no munge key could be made"
    fi
    chown munge:munge /etc/munge/munge.key && chmod 400 /etc/munge/munge.key
    mkdir -p /run/munge /var/lib/munge /var/log/munge
    chown munge:munge /run/munge /var/lib/munge /var/log/munge
    chmod 755 /run/munge
    runuser -u munge -- /usr/sbin/munged >/dev/null 2>&1 \
        || skip "munged did not start: $(tail -n 2 /var/log/munge/munged.log 2>/dev/null | tr '\n' ' ')"
    started+=(/run/munge/munged.pid)
    for _ in $(seq 20); do munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && break; sleep 0.25; done
fi

# --- slurmctld, slurmd -----------------------------------------------------------------
stop_started() {  # the daemons this run started, by the pid they wrote
    for f in "${started[@]}"; do
        if [ "$f" = /run/munge/munged.pid ]; then /usr/sbin/munged --stop >/dev/null 2>&1 && continue; fi
        running "$f" && kill "$(cat "$f")" 2>/dev/null
    done
}
fail() {
    echo "$me: $1; the log's last lines:"
    tail -n 8 "$2" 2>/dev/null | sed "s/^/$me:   /"
    stop_started
    skip "$1"
}
if ! running /run/slurm/slurmctld.pid; then
    /usr/sbin/slurmctld -f "$conf" || fail "slurmctld did not start" /var/log/slurm/slurmctld.log
    started+=(/run/slurm/slurmctld.pid)
fi
if ! running /run/slurm/slurmd.pid; then
    /usr/sbin/slurmd -f "$conf" || fail "slurmd did not start" /var/log/slurm/slurmd.log
    started+=(/run/slurm/slurmd.pid)
fi

deadline=$(( $(date +%s) + 60 ))
until answers 10; do
    if [ "$(date +%s)" -ge "$deadline" ]; then
        echo "$me: sinfo: $(sinfo -h -N -o '%N %T %E' 2>&1 | head -2 | tr '\n' ' ')"
        tail -n 4 /var/log/slurm/slurmctld.log 2>/dev/null | sed "s/^/$me:   slurmctld: /"
        fail "srun -n 1 true did not answer within 60 s" /var/log/slurm/slurmd.log
    fi
    sleep 1
done
say_up " (set up in $(( $(date +%s) - t0 )) s)"
