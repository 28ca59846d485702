#!/usr/bin/env bash
# The quickstart: set up, make the tiny model, teach it first skills by SFT on the environments'
# own demonstrations, then RL on configs/quickstart.toml from the SFT'd model. The warm-up is
# there because a random model's rewards are all zero, and group-relative RL learns nothing from
# a group of zeros. Steps already done (model, demos, SFT) are skipped on a second run; delete
# models/tiny or outputs/ to redo them. Extra arguments go to `rlx train`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
rlx=dist/rlx

[ -f models/tiny/config.json ] || $rlx init --preset tiny --out models/tiny

# Gold conversations of train-split tasks (tool calls and real tool outputs included).
mkdir -p outputs/demos
[ -s outputs/demos/math.jsonl ] || $rlx env demos math --n 64 --args '{"operations":["+"],"word_problems":false,"digits":1,"train_size":64,"eval_size":16}' --out outputs/demos/math.jsonl
[ -s outputs/demos/search.jsonl ] || $rlx env demos search --n 100 --out outputs/demos/search.jsonl
[ -s outputs/demos/forth.jsonl ] || $rlx env demos forth --n 100 --out outputs/demos/forth.jsonl

[ -f outputs/sft-quickstart/model/config.json ] || $rlx sft configs/sft_quickstart.toml --force  # --force: over a warm-up that was stopped

$rlx train configs/quickstart.toml --set model.path=outputs/sft-quickstart/model "$@"
