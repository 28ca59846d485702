# Sourced by bench scripts: warm_three_envs DIR makes DIR/warm/model once, the warm start of the
# three-environment mix (configs/examples/three_envs.toml): a tiny model after the warm-up the
# quickstart had then (configs/examples/sft_warmup_three_envs.toml: the three envs' demos, 200 SFT
# steps). Needs RLX (the binary) set.
warm_three_envs() {
  local W=$1
  [ -f "$W/warm/model/config.json" ] && return 0
  echo "== the warm model (rlx init tiny, the three envs' demos, 200 SFT steps)"
  mkdir -p "$W"
  $RLX init --preset tiny --seed 0 --out "$W/tiny" > /dev/null
  $RLX env demos math --n 64 --out "$W/math.jsonl" \
    --args '{"operations":["+"],"word_problems":false,"digits":1,"train_size":64,"eval_size":16}' > /dev/null
  $RLX env demos search --n 100 --out "$W/search.jsonl" > /dev/null
  $RLX env demos forth --n 100 --out "$W/forth.jsonl" > /dev/null
  $RLX sft configs/examples/sft_warmup_three_envs.toml --set output_dir="$W/warm" --set model.path="$W/tiny" \
    --set "data.path=[\"$W/math.jsonl\", \"$W/search.jsonl\", \"$W/forth.jsonl\"]" > "$W/warm.log" 2>&1
}
