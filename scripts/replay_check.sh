#!/usr/bin/env bash
# replay_check.sh DEVICE OUT [RLX...]: is a run's step reproducible after the fact on DEVICE?
# A 3-step run of the tiny preset on the letters env (the e2e tests' dense-reward env) with its
# trainer and policy on DEVICE (cpu, cuda), step files and weights kept (ckpt.keep_steps), audit
# records every step and a checkpoint every step; then `rlx replay --rollouts` of each step (its
# rollouts regenerated from the policy's schedule record: bit for bit, or the first token that
# differs) and `rlx replay --step 3 --gradient` from checkpoint 2 and from the start (checkpoints
# moved aside), printing per step whether the weights came back bit for bit or by how much they
# differ (docs/run-directory.md, "Replaying a step"). scripts/gpu_check.sh runs it with cuda. RLX is the
# command (default: bun src/main.ts); OUT gets run/, the replay lines and replay.json.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DEVICE=$1; OUT=$(realpath -m "$2"); shift 2
RLX=("$@"); [ ${#RLX[@]} -gt 0 ] || RLX=(bun "$ROOT/src/main.ts")
rm -rf "$OUT"; mkdir -p "$OUT"; cd "$OUT"
"${RLX[@]}" init --preset tiny --out model --seed 0 > /dev/null
sed -n '/^export const LETTERS_ENV = `/,/^`;/p' "$ROOT/test/e2e/train_helpers.ts" | sed '1d;$d' > letters.ts
cat > run.toml <<TOML
output_dir = "$OUT/run"
max_steps = 3
[model]
path = "$OUT/model"
[trainer]
device = "$DEVICE"
[inference]
device = "$DEVICE"
[trainer.optim]
lr = 3e-3
[orchestrator]
batch_size = 8
group_size = 4
seq_len = 256
max_tokens = 8
[ckpt]
interval = 1
keep = 5
keep_steps = true
[log]
rollouts_interval = 1
[[orchestrator.train.env]]
id = "$OUT/letters.ts"
TOML
"${RLX[@]}" train run.toml --inference in-process > train.log 2>&1 || { tail -20 train.log; exit 1; }
for step in 1 2 3; do "${RLX[@]}" replay run --step $step --rollouts | tee -a replay.txt || true; done
"${RLX[@]}" replay run --step 3 --gradient | tee -a replay.txt || true
mv run/checkpoints run/checkpoints.aside
"${RLX[@]}" replay run --step 3 --gradient --json > replay.json || true
"${RLX[@]}" replay run --step 3 --gradient | tee -a replay.txt || true
