#!/usr/bin/env bash
# dist/rlx copied alone into an empty folder, run against another libtorch than the one it was
# built with (a GPU node's pip PyTorch, say): it must compile its shim for that libtorch (cached),
# report it in `rlx doctor`, and train a fresh `rlx init` model for a few steps.
# Usage: bash scripts/lone_binary_check.sh LIBTORCH_DIR EXPECTED_VERSION
set -euo pipefail
cd "$(dirname "$0")/.."
libtorch=$(cd "$1" && pwd)
want=$2
[ -x dist/rlx ] || node_modules/.bin/bun build.ts
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cp dist/rlx "$dir/"
sed -n '/^export const LETTERS_ENV = `/,/^`;/p' test/e2e/train_helpers.ts | sed '1d;$d' >"$dir/letters.ts"
cd "$dir"
export LIBTORCH=$libtorch XDG_CACHE_HOME=$dir/cache
./rlx doctor --json --size 256 >doctor.json || true # exit 1 only flags findings (e.g. thread count)
got=$(grep -o '"torch_version": "[^"]*"' doctor.json | cut -d'"' -f4)
echo "[lone] rlx doctor: torch $got"
[ "$got" = "$want" ] || { echo "[lone] expected torch $want"; exit 1; }
./rlx init --preset tiny --out tiny >/dev/null
cat >run.toml <<CFG
output_dir = "out"
max_steps = 3
model = { path = "tiny" }
[trainer.optim]
lr = 1e-3
[orchestrator]
batch_size = 8
group_size = 4
seq_len = 128
max_tokens = 12
[[orchestrator.train.env]]
id = "letters.ts"
name = "letters"
CFG
./rlx train run.toml | grep -E '^step [0-9]+/3'
[ -f out/weights/step_3/published.json ] || { echo "[lone] no weights/step_3 published"; exit 1; }
echo "[lone] ok: dist/rlx alone trained 3 steps on torch $want"
