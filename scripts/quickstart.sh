#!/usr/bin/env bash
# The quickstart: set up, make the tiny model with a chat template that adds nothing
# (configs/templates/bare.jinja), teach it some 2-digit addition and subtraction by SFT on gold
# demonstrations (configs/sft_quickstart.toml, until a held-out score band), then RL on
# configs/quickstart.toml: GRPO on addition and MaxRL on subtraction in one run. The warm-up is
# there because a random model's rewards are all zero, and group-relative RL learns nothing from
# a group of zeros. Steps already done (model, demos, SFT) are skipped on a second run; delete
# models/tiny-bare or outputs/ to redo them. Extra arguments go to `rlx train`. It prints the
# time the quickstart itself took (setup excluded). WARM_ONLY=1 stops before the RL run (benches
# that time it from the warm model).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
rlx=dist/rlx
started=$(date +%s)

[ -f models/tiny-bare/config.json ] ||
  $rlx init --preset tiny --out models/tiny-bare --chat-template configs/templates/bare.jinja

mkdir -p outputs/demos
[ -s outputs/demos/addsub-bare.jsonl ] ||
  $rlx env demos math --n 6000 --args '{"operations":["+","-"],"format":"bare","train_size":6000}' --out outputs/demos/addsub-bare.jsonl

[ -f outputs/sft-quickstart/model/config.json ] || $rlx sft configs/sft_quickstart.toml --force # --force: over a warm-up that was stopped

[ "${WARM_ONLY:-}" = 1 ] && exit 0
$rlx train configs/quickstart.toml "$@"
echo "quickstart: $(($(date +%s) - started)) s (setup excluded)"
