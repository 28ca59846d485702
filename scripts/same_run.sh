#!/usr/bin/env bash
# same_run.sh RLX OUT: the check that a change which must not change behaviour (a reshaping, a
# refactor) did not. One deterministic run (docs/run-directory.md, "Deterministic runs") of four
# envs with their own algorithms (grpo and max_rl on a dense-reward env, opsd on math, echo on
# forth), checkpoints every 2 steps and an eval, with the binary RLX, from a fresh seed-0 `tiny`
# model; writes OUT/digests.txt (sha256 of every published weight file, checkpoint file, audit
# record and step file; the markers and manifests, which hold times, are left out) and
# OUT/metrics.txt (metrics.jsonl without its timing keys). Two builds behave the same when both
# files are identical. With dist/rlx of the commit before copied to /tmp/rlx-before (`bun build.ts`
# writes it), and this checkout built:
#   bash scripts/same_run.sh /tmp/rlx-before /tmp/before && bash scripts/same_run.sh dist/rlx /tmp/after
#   diff /tmp/before/digests.txt /tmp/after/digests.txt && diff /tmp/before/metrics.txt /tmp/after/metrics.txt
# About 10 s on 2 cores.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
RLX=$(realpath "$1"); OUT=$(realpath -m "$2")
rm -rf "$OUT"; mkdir -p "$OUT"; cd "$OUT"
"$RLX" init --preset tiny --out model --seed 0 >/dev/null
# the dense-reward letters env the e2e tests use (its one home: test/e2e/train_helpers.ts)
sed -n '/^export const LETTERS_ENV = `/,/^`;/p' "$ROOT/test/e2e/train_helpers.ts" | sed '1d;$d' >letters.ts
cat > run.toml <<TOML
output_dir = "$OUT/run"
max_steps = 4
deterministic = true
[model]
path = "$OUT/model"
[trainer.optim]
lr = 3e-3
[orchestrator]
batch_size = 16
group_size = 4
seq_len = 1536
max_tokens = 16
max_async_level = 0
[ckpt]
interval = 2
keep = 2
[orchestrator.eval]
interval = 2
num_examples = 4
k = 2
[[orchestrator.eval.env]]
id = "math"
[[orchestrator.train.env]]
id = "$OUT/letters.ts"
name = "grpo"
[[orchestrator.train.env]]
id = "$OUT/letters.ts"
name = "max_rl"
algo = { type = "max_rl" }
[[orchestrator.train.env]]
id = "math"
name = "opsd"
algo = { type = "opsd", demo_key = "solution" }
[[orchestrator.train.env]]
id = "forth"
name = "echo"
max_tokens = 48
algo = { type = "echo" }
TOML
"$RLX" train run.toml > train.log 2>&1
cd run
find weights checkpoints rollouts batches -type f ! -name manifest.json ! -name published.json | sort | xargs sha256sum > "$OUT/digests.txt"
python3 - > "$OUT/metrics.txt" <<'PY'
import json
for line in open("metrics.jsonl"):
    row = json.loads(line)
    print(json.dumps({k: v for k, v in row.items() if not (k == "time" or k.startswith(("time/", "throughput/")))}, sort_keys=True))
PY
wc -l "$OUT/digests.txt" "$OUT/metrics.txt"
