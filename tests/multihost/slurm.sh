#!/bin/bash
# A real Slurm cluster (Debian's slurmctld, slurmd, munge) on the test bed's hosts: the
# controller and a node on hostA, a node on every other host; one munged on hostA serves all
# (its socket is in the shared /run). Everything runs inside the hosts' namespaces, so
# `testbed.sh down` ends it; the configuration lives in STATE/slurm.
#   slurm.sh up STATE     (after testbed.sh up STATE N); prints SLURM_CONF's path
# Exits 77 (skip) when Slurm or munge is not installed.
set -u
state=$2
here=$(cd "$(dirname "$0")" && pwd)
testbed=$here/testbed.sh
d=$state/slurm
for tool in slurmctld slurmd munged salloc; do
  command -v $tool > /dev/null || [ -x /usr/sbin/$tool ] || { echo "SKIP: $tool is not installed (apt-get install slurmd slurmctld slurm-client munge)" >&2; exit 77; }
done
[ -r /etc/munge/munge.key ] || { echo "SKIP: no /etc/munge/munge.key" >&2; exit 77; }
mkdir -p "$d/munge" && chown munge:munge "$d/munge" && chmod 0755 "$d/munge" || exit 1
hosts=$(paste -sd, "$state/hosts")
cat > "$d/slurm.conf" <<CONF
ClusterName=nanotb
MailProg=/bin/true
SlurmctldHost=hostA
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$d/munge/munge.sock
CredType=cred/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SwitchType=switch/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
StateSaveLocation=$d/slurmctld
SlurmdSpoolDir=/dev/shm/slurmd
SlurmctldPidFile=$d/slurmctld.pid
SlurmdPidFile=/dev/shm/slurmd.pid
SlurmctldLogFile=$d/slurmctld.log
SlurmdLogFile=$d/slurmd-%n.log
NodeName=$hosts CPUs=2 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
# ip netns exec gives each host a fresh sysfs without cgroups; Slurm then needs cgroup/v1
# named (nothing is mounted or used with proctrack/linuxproc and task/none).
echo "CgroupPlugin=cgroup/v1" > "$d/cgroup.conf"
export SLURM_CONF=$d/slurm.conf
bash "$testbed" run "$state" hostA runuser -u munge -- munged --socket="$d/munge/munge.sock" \
  --pid-file="$d/munge/munged.pid" --log-file="$d/munge/munged.log" || exit 1
bash "$testbed" run "$state" hostA sh -c "mkdir -p $d/slurmctld; exec slurmctld -D -i -f $SLURM_CONF > $d/slurmctld.out 2>&1" &
n=0
for h in $(cat "$state/hosts"); do
  n=$((n + 1))
  bash "$testbed" run "$state" "$h" sh -c "mkdir -p /dev/shm/slurmd; exec slurmd -D -f $SLURM_CONF > $d/slurmd-$h.out 2>&1" &
done
for _ in $(seq 1 300); do  # ready: every node idle
  [ "$(bash "$testbed" run "$state" hostA sinfo -h -N -o '%N %t' 2> /dev/null | grep -c ' idle$')" = "$n" ] && {
    echo "$SLURM_CONF"
    exit 0
  }
  sleep 0.1
done
echo "FAIL: Slurm did not come up: $(tail -3 "$d"/slurmd-*.out "$d/slurmctld.out" 2>/dev/null)" >&2
exit 1
