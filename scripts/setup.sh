#!/usr/bin/env bash
# Makes a fresh Debian machine (Node.js, npm and apt only) ready to run rlx, then builds it:
# npm dependencies (Bun comes from npm), libtorch + OpenMP OpenBLAS + gloo from Debian, the
# native shim and dist/rlx. Idempotent and quick when everything is already there. apt is skipped
# when $LIBTORCH or a Python PyTorch install provides libtorch (GPU nodes). `--test` (what
# `npm test` runs) also installs what only the tests use: Chromium for the report's browser tests,
# python3-protobuf for the TensorBoard reader and python3-torch for the PyTorch references that
# read rlx's model and adapter directories, so the quickstart's install stays small.
set -euo pipefail
cd "$(dirname "$0")/.."

apt_install() {  # apt_install [APT_FLAG] PKG...: the packages that are not installed yet
  local flags="" missing="" pkg
  case "$1" in -*) flags="$1"; shift ;; esac
  for pkg in "$@"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing="$missing $pkg"
  done
  [ -n "$missing" ] || return 0
  echo "[setup] apt-get install$missing"
  local sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq $flags $missing >/dev/null
}

if [ ! -x node_modules/.bin/bun ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  echo "[setup] npm ci"
  npm ci --no-audit --no-fund --loglevel=error
fi

if [ -n "${LIBTORCH:-}" ]; then
  echo "[setup] libtorch from LIBTORCH=$LIBTORCH (apt skipped)"
elif [ ! -d /usr/include/torch ] && python3 -c 'import torch, os, sys; sys.exit(not os.path.isdir(os.path.join(os.path.dirname(torch.__file__), "include")))' 2>/dev/null; then
  echo "[setup] libtorch from python3's torch (apt skipped)"
else
  apt_install libtorch-dev libopenblas0-openmp libgloo-dev g++
fi
if [ "${1:-}" = "--test" ] && command -v apt-get >/dev/null; then
  apt_install --no-install-recommends chromium python3-protobuf python3-torch
fi

node_modules/.bin/bun build.ts
