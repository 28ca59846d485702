#!/usr/bin/env bash
# Makes a fresh Debian machine (Node.js, npm and apt only) ready to run rlx, then builds it:
# npm dependencies (Bun comes from npm), libtorch + OpenMP OpenBLAS + gloo from Debian, the
# native shim and dist/rlx. Idempotent and quick when everything is already there. apt is skipped
# when $LIBTORCH or a Python PyTorch install provides libtorch (GPU nodes).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ ! -x node_modules/.bin/bun ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  echo "[setup] npm ci"
  npm ci --no-audit --no-fund --loglevel=error
fi

if [ -n "${LIBTORCH:-}" ]; then
  echo "[setup] libtorch from LIBTORCH=$LIBTORCH (apt skipped)"
elif [ ! -d /usr/include/torch ] && python3 -c 'import torch, os, sys; sys.exit(not os.path.isdir(os.path.join(os.path.dirname(torch.__file__), "include")))' 2>/dev/null; then
  echo "[setup] libtorch from python3's torch (apt skipped)"
else
  missing=""
  for pkg in libtorch-dev libopenblas0-openmp libgloo-dev g++; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing="$missing $pkg"
  done
  if [ -n "$missing" ]; then
    echo "[setup] apt-get install$missing"
    sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq $missing >/dev/null
  fi
fi

node_modules/.bin/bun build.ts
