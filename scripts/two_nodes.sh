#!/usr/bin/env bash
# Two machines on one (docs/scaling.md, "Launching on several nodes"): two network namespaces
# joined by a veth pair play two hosts, A (10.231.0.1) and B (10.231.0.2), sharing this filesystem
# as nodes share a network filesystem. Each runs a trainer rank and an `rlx serve --policy` (with
# an API key: they listen off loopback); rank 0's TCP store is on A. Checks that
#   1. a run completes: rlx train on A (rank 0, the orchestrator), rlx trainer --rank 1 on B;
#   2. B's rank killed mid-run gives A the named error (a rank, its log), exit 1;
#   3. --resume on A and rank 1 restarted with --resume-from on B continue the run to its end.
# Needs root (ip netns). Usage: bash scripts/two_nodes.sh   (RLX="dist/rlx" to test the binary)
set -euo pipefail
cd "$(dirname "$0")/.."
RLX=${RLX:-"$PWD/node_modules/.bin/bun $PWD/src/main.ts"}
[ "$(id -u)" -eq 0 ] || { echo "two_nodes: needs root (ip netns)"; exit 2; }
source scripts/netns.sh
work=$(mktemp -d /tmp/rlx-two-nodes-XXXXXX)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  netns_down
  rm -rf "$work"
}
trap cleanup EXIT
netns_up rlx2n # A (10.231.0.1) and B (10.231.0.2), veths VA and VB; names unique to this run

$RLX init --preset tiny --out "$work/model" --seed 0 >/dev/null
run="$work/run"
cat >"$work/run.toml" <<EOF
output_dir = "$run"
max_steps = 4
model = { path = "$work/model" }
[trainer]
world_size = 2
[trainer.dist]
master_addr = "10.231.0.1"
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
base_urls = ["http://10.231.0.1:8131/v1", "http://10.231.0.2:8131/v1"]
api_key_var = "POLICY_KEY"
[ckpt]
interval = 2
[[orchestrator.train.env]]
id = "math"
EOF
export POLICY_KEY=two-nodes-key
serve() { # $1 namespace, $2 address: a policy server that loads only from the run directory
  ip netns exec "$1" env RLX_API_KEY=$POLICY_KEY $RLX serve --model "$work/model" --served-model-name policy \
    --policy --weights-root "$run" --host "$2" --port 8131 >"$work/serve-$1.log" 2>&1 &
  pids+=($!)
}
serve $A 10.231.0.1
serve $B 10.231.0.2
for addr in 10.231.0.1 10.231.0.2; do
  for _ in $(seq 100); do ip netns exec $A curl -sf "http://$addr:8131/health" >/dev/null && break; sleep 0.3; done
done
echo "two_nodes: policy servers up on A and B (API key required off loopback)"

rank1() { # rank 1 on B, once rank 0's run directory has its resolved config; $@: extra flags
  for _ in $(seq 200); do [ -f "$run/config.resolved.toml" ] && break; sleep 0.1; done
  ip netns exec $B env GLOO_SOCKET_IFNAME=$VB $RLX trainer --run-dir "$run" --rank 1 "$@" >>"$work/rank1.log" 2>&1 &
  rank1_pid=$!
  pids+=($rank1_pid)
}

# 1. a whole run
ip netns exec $A env GLOO_SOCKET_IFNAME=$VA $RLX train "$work/run.toml" >"$work/train1.log" 2>&1 &
train_pid=$!
rank1
wait $train_pid || { echo "two_nodes: FAIL: the run did not complete"; tail -n 20 "$work/train1.log" "$work/rank1.log"; exit 1; }
wait $rank1_pid || true
steps=$(grep -c '"step"' "$run/metrics.jsonl")
[ "$steps" -eq 4 ] || { echo "two_nodes: FAIL: $steps metrics lines, expected 4"; exit 1; }
echo "two_nodes: 1. a run of 4 steps completed over two hosts (rank 0 on A, rank 1 on B, a policy server on each)"

# 2. B's rank killed mid-run: A names it
rm -rf "$run"
sed -i 's/^max_steps = 4/max_steps = 8/' "$work/run.toml"
: >"$work/rank1.log"
ip netns exec $A env GLOO_SOCKET_IFNAME=$VA $RLX train "$work/run.toml" >"$work/train2.log" 2>&1 &
train_pid=$!
rank1
for _ in $(seq 600); do [ -f "$run/checkpoints/step_2/manifest.json" ] && break; sleep 0.1; done
[ -f "$run/checkpoints/step_2/manifest.json" ] || { echo "two_nodes: FAIL: no checkpoint 2"; tail -n 20 "$work/train2.log"; exit 1; }
kill -9 $rank1_pid
if wait $train_pid; then echo "two_nodes: FAIL: the run went on without rank 1"; exit 1; fi
grep -q "error: the trainer" "$work/train2.log" || { echo "two_nodes: FAIL: no named error"; tail -n 20 "$work/train2.log"; exit 1; }
echo "two_nodes: 2. rank 1 killed on B: A stopped with:"
grep -m1 "error:" "$work/train2.log" | sed 's/^/    /'
grep -m1 "| error:" "$work/train2.log" | sed 's/^/    /'

# 3. --resume on A, rank 1 from the same checkpoint on B
ckpt=$(ls -d "$run"/checkpoints/step_* | sort -V | tail -1)
ip netns exec $A env GLOO_SOCKET_IFNAME=$VA $RLX train "$work/run.toml" --resume >"$work/train3.log" 2>&1 &
train_pid=$!
sleep 1 # rank 0 rewinds the run directory first
rank1 --resume-from "$ckpt"
wait $train_pid || { echo "two_nodes: FAIL: the resumed run failed"; tail -n 20 "$work/train3.log" "$work/rank1.log"; exit 1; }
steps=$(grep -c '"step"' "$run/metrics.jsonl")
[ "$steps" -eq 8 ] || { echo "two_nodes: FAIL: $steps metrics lines after resume, expected 8"; exit 1; }
echo "two_nodes: 3. resumed from $(basename "$ckpt") on both hosts; the run completed its 8 steps"
echo "two_nodes: PASS"
