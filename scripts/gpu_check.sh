#!/usr/bin/env bash
# The GPU check (docs/gpu.md), for a GPU node with a Python PyTorch (CUDA), g++ and no Node, Bun or
# network, in about 5 minutes: Bun and the npm dependencies come from .gpu/ (scripts/gpu_pack.sh
# made it); the shim is built against python3's torch; `rlx doctor` and the native tests run on
# it (test/native/cuda.test.ts included: a "full" sharded step over NCCL among them); then
# bench/gpu.ts measures on the qwen3-0.6b preset, and bench/dist_step.ts a "full" sharded step
# there (with and without the next layer's gather overlapping the compute, and its peak memory),
# and bench/weight_transfer.ts a step's weights reaching a GPU policy server from disk and over a
# weight channel (Gloo: NCCL needs two GPUs, one per end), and bench/long_context.ts a 16k-token
# row trained whole and split over two context-parallel ranks (both on the one GPU, over Gloo), and
# bench/long_serve.ts the engine serving 4 x 16k-token sequences beside 64 short ones in a paged
# K/V budget (the decode's ATen path: blocks gathered, SDPA), and bench/group_prefill.ts an RL
# group of one 16k-token prompt prefilled once (shared blocks), and scripts/replay_check.sh whether
# `rlx replay --rollouts` and `--gradient` give a GPU policy's rollouts and a GPU trainer's steps
# back bit for bit. Everything it prints and
# writes lands in $OUT (default .gpu/out): doctor.json, native_tests.txt, gpu_check.json,
# gpu_check.txt, shard_step.txt, weight_transfer.txt, long_context.txt, long_serve.txt, group_prefill.txt,
# replay.txt.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-.gpu/out}
mkdir -p "$OUT"
exec > >(tee "$OUT/gpu_check.log") 2>&1
start=$(date +%s)
step() { echo "[gpu_check $(($(date +%s) - start))s] $*"; }

BUN=$PWD/.gpu/bun
if [ ! -x "$BUN" ]; then
  [ -s .gpu/bun.xz ] || { echo "no .gpu/bun.xz: run scripts/gpu_pack.sh first and carry .gpu"; exit 1; }
  xz -dc .gpu/bun.xz >"$BUN" && chmod +x "$BUN"
fi
[ -d node_modules/zod ] || tar -xJf .gpu/node_modules.tar.xz
step "python torch: $(python3 -c 'import torch; print(torch.__version__, "cuda", torch.version.cuda, "gpu", torch.cuda.is_available())')"

step "building the shim against python3's torch"
"$BUN" build.ts --shim --out-dir native/build/gpu || exit 1
export RLX_SHIM=$PWD/native/build/gpu/librlx.so

step "rlx doctor"
"$BUN" src/main.ts doctor --json --size 4096 >"$OUT/doctor.json"
cat "$OUT/doctor.json"

step "native tests (CUDA ones included)"
"$BUN" test --timeout 120000 test/native 2>&1 | tee "$OUT/native_tests.txt" | grep -E "^\(fail\)|^ *[0-9]+ (pass|fail|skip)$|cuda"

step "benchmarks: trainer against PyTorch eager, decode, generation vs scoring"
RLX_BENCH_PYTHON=$(command -v python3) "$BUN" bench/gpu.ts --device cuda --preset qwen3-0.6b --tokens 16384 \
  --batches 1,64,256 --json "$OUT/gpu_check.json" | tee "$OUT/gpu_check.txt"
step "sharded training: a \"full\" step on one NCCL rank with and without gathering ahead, its peak memory"
"$BUN" bench/dist_step.ts --device cuda --shard full --preset qwen3-0.6b --samples 16 --steps 3 | tee "$OUT/shard_step.txt"
step "weight transfer: a qwen3-0.6b step to one policy server on the GPU, disk against c10d (Gloo channel)"
"$BUN" bench/weight_transfer.ts --device cuda --dtype bf16 --servers 1 --rounds 2 | tee "$OUT/weight_transfer.txt"
step "long context: a 16k-token row on the GPU whole and split over 2 ranks (Gloo: both on this GPU)"
"$BUN" bench/long_context.ts --device cuda --lengths 16384 --splits 1,2 --steps 2 --no-serve | tee "$OUT/long_context.txt"
step "long rollouts: 4 x 16k beside 64 short sequences in a paged K/V budget, against slots x capacity"
"$BUN" bench/long_serve.ts --device cuda | tee "$OUT/long_serve.txt"
step "a group's rollouts: 4 of one 16k-token prompt (prefilled once) against 4 distinct prompts"
"$BUN" bench/group_prefill.ts --device cuda | tee "$OUT/group_prefill.txt"
step "replay: a 3-step run's rollouts and trainer steps on the GPU recomputed by rlx replay (bit for bit, or the difference)"
bash scripts/replay_check.sh cuda "$OUT/replay" "$BUN" "$PWD/src/main.ts" | tee "$OUT/replay.txt"
step "done"
