#!/usr/bin/env bash
# The quickstart: set up, make the tiny model if it is not there, train on configs/quickstart.toml.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
[ -f models/tiny/config.json ] || dist/rlx init --preset tiny --out models/tiny
dist/rlx train configs/quickstart.toml "$@"
