#!/usr/bin/env bash
# Packs what a GPU node without Node or Bun needs to run scripts/gpu_check.sh: the Bun binary and
# the runtime npm dependencies, compressed into .gpu/ (git-ignored; about 40 MB, under the device
# tool's 64 MiB). Run it here, then hand .gpu/ over with the tree (the device tool's `carry`).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x node_modules/.bin/bun ] || bash scripts/setup.sh
mkdir -p .gpu
if [ ! -s .gpu/bun.xz ] || [ node_modules/bun/bin/bun.exe -nt .gpu/bun.xz ]; then
  echo "[gpu_pack] compressing bun (about a minute)"
  xz -T0 -6 -c node_modules/bun/bin/bun.exe >.gpu/bun.xz
fi
deps=$(node -e 'console.log(Object.keys(require("./package.json").dependencies).map((d) => "node_modules/" + d).join(" "))')
# every package those depend on, as npm installed them (the lock file lists them)
nested=$(node -e '
const lock = require("./package-lock.json").packages;
const seen = new Set();
const visit = (name) => {
  if (seen.has(name)) return;
  seen.add(name);
  for (const dep of Object.keys(lock["node_modules/" + name]?.dependencies ?? {})) visit(dep);
};
Object.keys(require("./package.json").dependencies).forEach(visit);
console.log([...seen].map((d) => "node_modules/" + d).join(" "));')
tar -cJf .gpu/node_modules.tar.xz $deps $nested 2>/dev/null || tar -cJf .gpu/node_modules.tar.xz $deps
du -sh .gpu/bun.xz .gpu/node_modules.tar.xz
