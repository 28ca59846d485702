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
#   bash scripts/slurm_nodes.sh rlx          a 2-node job running two_nodes.sh's 4-step run: rank 0
#                                            and the orchestrator on nodea, rank 1 on nodeb
#                                            (RLX="..." to run another build than dist/rlx)
#
# Everything lives under one temp dir (munge key and socket, slurm.conf, spool, state, logs) and is
# torn down on exit: daemons killed, namespaces (and their veths) deleted, the temp dir removed.
#
# What it took to make slurmd work in namespaces (Slurm 22.05.8, Debian 12):
#   - a UTS namespace per daemon (`unshare --uts` inside `nsenter --net`) named after its node:
#     slurmctld only runs where the hostname is a SlurmctldHost, slurmd takes its NodeName from the
#     hostname, and `srun hostname` then tells the nodes apart. Addresses are given as NodeAddr and
#     SlurmctldHost=nodea(10.231.0.1), so no name has to resolve.
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
# Cluster up in ~1 s; `check` ~13 s in all (sbatch --wait polls), `rlx` ~80 s on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-check}
RLX=${RLX:-"$PWD/dist/rlx"}
say() { echo "slurm_nodes: $*"; }
[ "$(id -u)" -eq 0 ] || { say "needs root (ip netns, apt-get, slurmd)"; exit 2; }
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
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  netns_down # what the daemons left (a job's processes), then the namespaces
  rm -rf "$work"
}
trap cleanup EXIT
netns_up rlxsl
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
  # two_nodes.sh's first check as one Slurm job: the same config and commands, one srun step per
  # process on its node (--overlap: the job holds one CPU a node, the steps share it). The job script
  # is written here by hand; `rlx launch slurm` is to generate it
  $RLX init --preset tiny --out "$work/model" --seed 0 >/dev/null
  run=$work/run
  cat >"$work/run.toml" <<EOF
output_dir = "$run"
max_steps = 4
model = { path = "$work/model" }
[trainer]
world_size = 2
[trainer.dist]
master_addr = "$IP_A"
master_port = 29531
local_ranks = [0]
timeout_s = 30
[orchestrator]
batch_size = 8
group_size = 2
seq_len = 512
max_tokens = 8
filter_zero_advantages = false
[inference]
base_urls = ["http://$IP_A:8131/v1", "http://$IP_B:8131/v1"]
api_key_var = "POLICY_KEY"
[ckpt]
interval = 2
[[orchestrator.train.env]]
id = "math"
EOF
  # the job script, with this run's paths written in ($ escaped: expanded in the job)
  cat >"$work/rlx.sh" <<EOF
#!/bin/bash
#SBATCH --job-name=rlx-two-nodes --nodes=2 --ntasks-per-node=1 --time=10
set -uo pipefail
export POLICY_KEY=slurm-nodes-key
on() { local node=\$1; shift; srun --overlap --nodes=1 --ntasks=1 --nodelist=\$node "\$@"; }
# nodea and nodeb: a policy server each, off loopback, so with an API key
on nodea env RLX_API_KEY=\$POLICY_KEY $RLX serve --model $work/model --served-model-name policy \\
  --policy --weights-root $run --host $IP_A --port 8131 >$work/serve-nodea.log 2>&1 &
on nodeb env RLX_API_KEY=\$POLICY_KEY $RLX serve --model $work/model --served-model-name policy \\
  --policy --weights-root $run --host $IP_B --port 8131 >$work/serve-nodeb.log 2>&1 &
for addr in $IP_A $IP_B; do
  for _ in \$(seq 100); do curl -sf http://\$addr:8131/health >/dev/null && break; sleep 0.3; done
done
echo "policy servers up on nodea and nodeb"
# nodeb, once rank 0 wrote the resolved config: rank 1
on nodeb bash -c 'for _ in \$(seq 200); do [ -f $run/config.resolved.toml ] && break; sleep 0.1; done
  GLOO_SOCKET_IFNAME=$VB exec $RLX trainer --run-dir $run --rank 1' >$work/rank1.log 2>&1 &
rank1=\$!
# nodea: the orchestrator and rank 0
on nodea env GLOO_SOCKET_IFNAME=$VA $RLX train $work/run.toml >$work/train.log 2>&1
rc=\$?
wait \$rank1 || rc=1
steps=\$(grep -c '"step"' $run/metrics.jsonl 2>/dev/null)
echo "rlx train: exit \$rc, \${steps:-0} metrics lines, published: \$(ls $run/weights 2>/dev/null | xargs)"
[ "\$rc" -eq 0 ] && [ "\${steps:-0}" -eq 4 ] && [ -f $run/weights/step_4/published.json ] ||
  { tail -n 20 $work/train.log $work/rank1.log; exit 1; }
EOF
  t0=$(date +%s)
  submit "$work/rlx.sh" || { say "FAIL: the rlx job failed"; logs; exit 1; }
  say "rlx: a 4-step run as a 2-node Slurm job (rank 0 on nodea, rank 1 on nodeb) in $(($(date +%s) - t0)) s"
  say "PASS"
  ;;
esac
