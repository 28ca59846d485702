#!/usr/bin/env bash
# The PyTorch 2.x legs of CI (docs/gpu.md): rlx built and tested against the PyTorch wheels this
# machine kind keeps on disk, beside the Debian libtorch 1.13 run of `npm test`.
#
#   cpu   torch-2.*+cpu wheel: the shim built against it, then the whole suite again with it, then
#         dist/rlx copied alone into an empty folder and run on that libtorch (it compiles its
#         shim for it: scripts/lone_binary_check.sh).
#   cuda  torch-2.* CUDA wheel and the nvidia_* wheels beside it: the shim built and linked
#         against it (NCCL backend included), then the native tests run with it on this CPU.
#
# Wheels are found under $RLX_WHEELS (default: /opt/wheels, /opt/pypi, /opt/pypi-more, two levels deep) and
# unpacked once into $RLX_WHEEL_CACHE (default ~/.cache/rlx/wheels). Each libtorch builds into its
# own folder (native/build/torch-<version>-<cpu|cuda>) and the tests load it through RLX_SHIM. A leg
# whose wheel is absent says so and is skipped, so a machine without them stays green.
# Usage: bash scripts/torch_matrix.sh [cpu] [cuda]   (default: both)
set -uo pipefail
cd "$(dirname "$0")/.."
BUN=node_modules/.bin/bun
CACHE=${RLX_WHEEL_CACHE:-$HOME/.cache/rlx/wheels}
SEARCH=${RLX_WHEELS:-/opt/wheels /opt/pypi /opt/pypi-more}
legs=${*:-cpu cuda}
status=0

wheels() { # $1: a glob of wheel file names; every match under $SEARCH
  for dir in $SEARCH; do [ -d "$dir" ] && find "$dir" -maxdepth 2 -name "$1"; done 2>/dev/null
}

find_wheel() { # $1: a glob of wheel file names, $2: a pattern to leave out; prints the newest match
  wheels "$1" | grep -v -- "${2:-^$}" | sort -V | tail -1
}

unpack() { # $1: wheel, $2: target root, $3...: member globs; once per wheel (a marker file says done)
  local wheel=$1 root=$2 marker
  shift 2
  marker="$root/.unpacked-$(basename "$wheel")"
  [ -f "$marker" ] && return 0
  # python3's zipfile rather than unzip, which a fresh machine may not have
  mkdir -p "$root" && python3 - "$wheel" "$root" "$@" <<'PY' && touch "$marker"
import fnmatch, sys, zipfile
wheel, root, globs = sys.argv[1], sys.argv[2], sys.argv[3:]
with zipfile.ZipFile(wheel) as z:
    members = [m for m in z.namelist() if any(fnmatch.fnmatch(m, g) for g in globs)]
    z.extractall(root, members)
PY
}

run_leg() { # $1: name, then the command; counts toward the exit status
  local name=$1
  shift
  echo "[matrix] $name: $*"
  if ! "$@"; then
    echo "[matrix] $name: FAILED"
    status=1
    return 1
  fi
}

for leg in $legs; do
  case $leg in
  cpu)
    wheel=$(find_wheel 'torch-2*+cpu-*.whl')
    if [ -z "$wheel" ]; then
      echo "[matrix] cpu: skipped (no torch-2.*+cpu wheel under $SEARCH)"
      continue
    fi
    root="$CACHE/$(basename "$wheel" .whl)"
    unpack "$wheel" "$root" 'torch/include/*' 'torch/lib/*' || { status=1; continue; }
    version=$(basename "$wheel" | sed -E 's/^torch-([0-9.]+).*/\1/')
    out="native/build/torch-$version-cpu"
    run_leg "cpu build (torch $version)" env LIBTORCH="$root/torch" $BUN build.ts --shim --out-dir "$out" || continue
    run_leg "cpu suite (torch $version)" env RLX_SHIM="$PWD/$out/librlx.so" $BUN test --timeout 120000
    run_leg "dist/rlx alone on torch $version" bash scripts/lone_binary_check.sh "$root/torch" "$version"
    ;;
  cuda)
    wheel=$(find_wheel 'torch-2*-manylinux*.whl' '+cpu')
    if [ -z "$wheel" ]; then
      echo "[matrix] cuda: skipped (no CUDA torch-2.* wheel under $SEARCH)"
      continue
    fi
    root="$CACHE/$(basename "$wheel" .whl)"
    unpack "$wheel" "$root" 'torch/include/*' 'torch/lib/*' || { status=1; continue; }
    nvidia=$(wheels 'nvidia_*.whl')
    if [ -z "$nvidia" ]; then
      echo "[matrix] cuda: skipped (no nvidia_* wheels beside $wheel: libtorch_cuda cannot load)"
      continue
    fi
    for w in $nvidia; do unpack "$w" "$root" 'nvidia/*' || status=1; done
    version=$(basename "$wheel" | sed -E 's/^torch-([0-9.]+).*/\1/')
    out="native/build/torch-$version-cuda"
    run_leg "cuda build (torch $version)" env LIBTORCH="$root/torch" $BUN build.ts --shim --out-dir "$out" || continue
    # the NCCL backend must be compiled in (its symbols come from libtorch_cuda)
    if nm -C "$out/librlx.so" 2>/dev/null | grep ProcessGroupNCCL >/dev/null; then # not -q: an early exit would SIGPIPE nm under pipefail
      echo "[matrix] cuda: NCCL backend compiled in"
    else
      echo "[matrix] cuda: FAILED: the NCCL backend is not compiled in (nccl.h or cuda_runtime_api.h not found)"
      status=1
    fi
    run_leg "cuda native tests on the CPU (torch $version)" env RLX_SHIM="$PWD/$out/librlx.so" $BUN test --timeout 120000 test/native
    ;;
  *)
    echo "[matrix] unknown leg $leg (cpu, cuda)"
    status=1
    ;;
  esac
done
exit $status
