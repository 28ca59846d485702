#!/usr/bin/env bash
# A real Slurm on two hosts on one machine (docs/scaling.md, "What was tested: a real Slurm on two
# namespaces"): Debian's slurm-wlm and munge, slurmctld and slurmd "nodea" in one network namespace,
# slurmd "nodeb" in another (scripts/netns.sh: 10.231.0.1 and 10.231.0.2 over a veth pair), all
# sharing this filesystem as nodes share a network filesystem. Needs root and apt: it installs
# slurm-wlm and munge with apt-get when they are missing.
#
#   bash scripts/slurm_nodes.sh check        a 2-node `sbatch --wait` job: `srun hostname` must come
#                                            back from both nodes with both addresses; prints the
#                                            SLURM_* variables a one-task step sees
#   bash scripts/slurm_nodes.sh run JOB.sh   `sbatch --wait JOB.sh` (its path on this filesystem),
#                                            prints the job's output, exits with its status; the job
#                                            sees IP_A, IP_B, VA, VB (the veths) and RLX_SLURM_WORK
#   bash scripts/slurm_nodes.sh rlx          two_nodes.sh's 4-step run as the job `rlx launch slurm
#                                            --nodes 2` writes, submitted as written: rank 0, the
#                                            orchestrator and its policy server on nodea, rank 1 on
#                                            nodeb; then the same script again, continuing to
#                                            step 6 (RLX="..." to run another build than dist/rlx)
#
# Everything lives under one temp dir (munge key and socket, slurm.conf, spool, state, logs) and is
# torn down on exit: daemons killed, namespaces (and their veths) deleted, the temp dir removed.
#
# What it took to make slurmd work in namespaces (Slurm 22.05.8, Debian 12):
#   - a UTS namespace per daemon (`unshare --uts` inside `nsenter --net`) named after its node:
#     slurmctld only runs where the hostname is a SlurmctldHost, slurmd takes its NodeName from the
#     hostname, and `srun hostname` then tells the nodes apart. Slurm itself needs no name to
#     resolve (NodeAddr, SlurmctldHost=nodea(10.231.0.1)), but rlx does, as on a cluster: rank 0's
#     store is the first host of SLURM_JOB_NODELIST and Gloo listens on the hostname's address. So
#     the script runs in a private mount namespace with nodea and nodeb added to a bind-mounted
#     /etc/hosts, which goes away with it.
#   - one munged serves everything: its socket is a path on the shared filesystem, and path sockets
#     are not bound to a network namespace. Its own key, socket, pid, seed and log under the temp dir
#     (AuthInfo=socket=... for auth/munge and cred/munge), so the host's munge is left alone.
#   - no cgroups and no accounting: proctrack/linuxproc, task/none, jobacct_gather/none,
#     accounting_storage/none; SlurmUser and SlurmdUser root so the temp dirs need no chown.
#   - nsenter --net, not `ip netns exec`, to enter a namespace: the latter mounts a fresh /sys, which
#     hides /sys/fs/cgroup, and slurmd 22.05 initialises its cgroup plugin even when nothing uses it
#     ("No filesystem mounted on /sys/fs/cgroup ... slurmd initialization failed").
#   - the spool directories made beforehand (slurmd does not create them).
#   - a cgroup.conf with IgnoreSystemd=yes for hosts with cgroup v2 alone; untried: this host has v1.
#   - clients (sinfo, sbatch) run inside namespace A with SLURM_CONF pointing at the temp conf.
# Cluster up in ~1 s; `check` ~13 s in all (sbatch --wait polls), `rlx` ~90 s on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-check}
RLX=${RLX:-"$PWD/dist/rlx"}
say() { echo "slurm_nodes: $*"; }
[ "$(id -u)" -eq 0 ] || { say "needs root (ip netns, apt-get, slurmd)"; exit 2; }
# again in a mount namespace of its own, for the /etc/hosts below (see the header)
[ -n "${RLX_SLURM_MOUNTNS:-}" ] || RLX_SLURM_MOUNTNS=1 exec unshare --mount --propagation private bash "$0" "$@"
case $mode in
check | rlx) ;;
run) [ -f "${2:-}" ] || { say "run: no job script '${2:-}'"; exit 2; } ;;
*) say "usage: slurm_nodes.sh check | run JOB.sh | rlx"; exit 2 ;;
esac

if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null || ! command -v sbatch >/dev/null ||
  ! command -v munged >/dev/null; then
  say "installing slurm-wlm and munge (apt-get)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq --no-install-recommends slurm-wlm munge >/dev/null
fi
say "$(slurmctld -V), $(munged -V 2>&1 | awk '{print $1; exit}')"

source scripts/netns.sh
work=$(mktemp -d /tmp/rlx-slurm-XXXXXX)
chmod 711 "$work" # munged wants its socket reachable by all (only root uses it here)
# rlx mode's run directory, on the "shared filesystem": the checkout's runs/, or the user's cache when
# the checkout is itself under a node-local root (rlx launch slurm refuses /tmp, /var/tmp, /dev/shm, /run)
case "$PWD/" in
/tmp/* | /var/tmp/* | /dev/shm/* | /run/*) run=${XDG_CACHE_HOME:-$HOME/.cache}/rlx/slurm-nodes-$$ ;;
*) run=$PWD/runs/slurm-nodes-$$ ;;
esac
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  netns_down # what the daemons left (a job's processes), then the namespaces
  umount /etc/hosts 2>/dev/null || true
  rm -rf "$work" "$run" "$run.slurm"
}
trap cleanup EXIT
netns_up rlxsl
{ cat /etc/hosts; echo "$IP_A nodea"; echo "$IP_B nodeb"; } >"$work/hosts"
mount --bind "$work/hosts" /etc/hosts
export IP_A IP_B VA VB RLX_SLURM_WORK=$work
mkdir -p "$work"/{munge,ctld,log,nodea/spool,nodeb/spool}
logs() { for f in "$work"/log/*.log; do echo "== $f"; tail -n 30 "$f"; done; }

# munge: a fresh key, one daemon (in A) whose socket every namespace reaches through the filesystem
dd if=/dev/urandom of="$work/munge/munge.key" bs=1024 count=1 status=none
chmod 400 "$work/munge/munge.key"
sock=$work/munge/munge.socket
ip netns exec $A munged -F -f --key-file="$work/munge/munge.key" --socket="$sock" \
  --pid-file="$work/munge/munged.pid" --seed-file="$work/munge/munged.seed" \
  --log-file="$work/log/munged.log" >>"$work/log/munged.log" 2>&1 &
pids+=($!)
for _ in $(seq 50); do [ -S "$sock" ] && break; sleep 0.1; done
[ -S "$sock" ] || { say "FAIL: munged did not start"; logs; exit 1; }

export SLURM_CONF=$work/slurm.conf
cat >"$SLURM_CONF" <<EOF
ClusterName=rlx
SlurmctldHost=nodea($IP_A)
SlurmctldPort=6817
SlurmdPort=6818
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$sock
StateSaveLocation=$work/ctld
SlurmdSpoolDir=$work/%n/spool
SlurmctldPidFile=$work/ctld/slurmctld.pid
SlurmdPidFile=$work/%n/slurmd.pid
SlurmctldLogFile=$work/log/slurmctld.log
SlurmdLogFile=$work/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SwitchType=switch/none
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
ReturnToService=2
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
MinJobAge=60
PropagateResourceLimits=NONE
NodeName=nodea NodeAddr=$IP_A CPUs=$(nproc) State=UNKNOWN
NodeName=nodeb NodeAddr=$IP_B CPUs=$(nproc) State=UNKNOWN
PartitionName=rlx Nodes=nodea,nodeb Default=YES MaxTime=INFINITE State=UP
EOF
# read beside slurm.conf; only cgroup/v2 (a host with cgroup v2 alone) reads IgnoreSystemd: make the
# stepd scope in cgroupfs instead of asking systemd over D-Bus. Untried: this host mounts cgroup v1
echo "IgnoreSystemd=yes" >"$work/cgroup.conf"

# $1 namespace, $2 hostname, then the daemon's command line: in its own UTS namespace (nsenter: see
# the header for why not `ip netns exec`)
daemon() {
  local ns=$1 name=$2 log=$work/log/$3-$2.out
  shift 2
  nsenter --net=/run/netns/"$ns" unshare --uts sh -c "hostname $name && exec \"\$@\"" sh "$@" >"$log" 2>&1 &
  pids+=($!)
}
daemon $A nodea slurmctld -D -f "$SLURM_CONF"
daemon $A nodea slurmd -D -f "$SLURM_CONF"
daemon $B nodeb slurmd -D -f "$SLURM_CONF"
ctl() { ip netns exec $A "$@"; } # a client, run on A
t0=$(date +%s)
for _ in $(seq 120); do
  idle=$(ctl sinfo -h -N -o '%N %t' 2>/dev/null | grep -c ' idle$' || true)
  [ "$idle" -eq 2 ] && break
  sleep 0.5
done
[ "$idle" -eq 2 ] || { say "FAIL: nodes not idle after 60 s"; ctl sinfo -N 2>&1 || true; logs; exit 1; }
say "nodea ($IP_A) and nodeb ($IP_B) idle after $(($(date +%s) - t0)) s"

# sbatch --wait JOB [sbatch args]: prints the job's output, returns the job's exit status
submit() {
  local job=$1 out=$work/job-$(basename "$1").out rc=0
  shift
  ctl sbatch --wait --output="$out" "$@" "$job" || rc=$?
  [ -f "$out" ] && cat "$out"
  return $rc
}

case $mode in
check)
  cat >"$work/check.sh" <<'EOF'
#!/bin/bash
#SBATCH --job-name=rlx-check --nodes=2 --ntasks-per-node=1 --time=2
srun bash -c 'echo "host $(hostname) $(hostname -I)"'
echo "SLURM_* seen by a one-task step on nodeb:"
srun --nodes=1 --ntasks=1 --nodelist=nodeb bash -c 'env | grep ^SLURM_ | sort | sed "s/^/  /"'
EOF
  t0=$(date +%s)
  out=$(submit "$work/check.sh") || { echo "$out"; say "FAIL: the check job failed"; logs; exit 1; }
  echo "$out"
  for want in "host nodea $IP_A" "host nodeb $IP_B"; do
    grep -q "^$want" <<<"$out" || { say "FAIL: no '$want' in the job's output"; logs; exit 1; }
  done
  say "check: 2-node job: srun hostname came back from nodea ($IP_A) and nodeb ($IP_B) in $(($(date +%s) - t0)) s"
  say "PASS"
  ;;
run)
  job=$(realpath "$2")
  shift 2
  submit "$job" "$@"
  ;;
rlx)
  # two_nodes.sh's first check as one Slurm job, the script `rlx launch slurm` writes submitted as
  # written: Slurm's variables place the ranks, the job's first host serves the store
  $RLX init --preset tiny --out "$work/model" --seed 0 >/dev/null
  cat >"$work/run.toml" <<EOF
output_dir = "$run"
max_steps = 4
model = { path = "$work/model" }
[trainer.dist]
timeout_s = 30
[orchestrator]
batch_size = 8
group_size = 2
seq_len = 512
max_tokens = 8
filter_zero_advantages = false
[ckpt]
interval = 2
[[orchestrator.train.env]]
id = "math"
EOF
  $RLX launch slurm "$work/run.toml" --nodes 2 --time 10 --master-port 29531
  failed() { say "FAIL: $*"; tail -n 20 "$run".slurm/job-*/*.log; logs; exit 1; }
  t0=$(date +%s)
  submit "$run.slurm/launch.sbatch" || failed "the rlx job failed"
  steps=$(grep -c '"step"' "$run/metrics.jsonl" 2>/dev/null || true)
  ranks=$(cd "$run".slurm/job-* && ls trainer-*.log | xargs)
  say "rlx: ${steps:-0} metrics lines, published: $(ls "$run/weights" 2>/dev/null | xargs); trainer logs: $ranks"
  [ "${steps:-0}" -eq 4 ] && [ -f "$run/weights/step_4/published.json" ] || failed "the job ended without its 4 steps"
  [ "$ranks" = "trainer-nodea-rank0.log trainer-nodeb-rank1.log" ] || failed "expected rank 0 on nodea, rank 1 on nodeb"
  say "rlx: a 4-step run as the 2-node job rlx launch slurm wrote (rank 0 on nodea, rank 1 on nodeb) in $(($(date +%s) - t0)) s"
  # the same script again (as a requeue runs it) after the config's max_steps went up: rlx train and
  # both ranks continue from checkpoint 4 (--resume, the script's choice when checkpoints exist)
  sed -i 's/^max_steps = 4$/max_steps = 6/' "$work/run.toml"
  t0=$(date +%s)
  submit "$run.slurm/launch.sbatch" || failed "the job run again failed"
  steps=$(grep -c '"step"' "$run/metrics.jsonl" 2>/dev/null || true)
  [ "${steps:-0}" -eq 6 ] && [ -f "$run/weights/step_6/published.json" ] || failed "the job run again did not reach step 6"
  grep -q "resuming after step 4 of 6" "$run".slurm/job-*/orchestrator-nodea.log || failed "the job run again did not resume"
  say "rlx: the same job run again continued from checkpoint 4 to step 6 in $(($(date +%s) - t0)) s"
  say "PASS"
  ;;
esac
