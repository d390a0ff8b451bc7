#!/usr/bin/env bash
# scripts/train.sh: build xgrad (Release, in build/) and train.
#
# For now this runs the autograd demo (examples/demo_autograd.cpp: fits y = 3x + 2 with
# autograd and a hand-written SGD loop, printing the loss and the learned weights). The GPT
# character-level trainer replaces it here when it lands.
#
# Environment: XGRAD_JOBS (default: nproc), XGRAD_BUILD_DIR (build), XGRAD_SKIP_DEPS=1.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
jobs=${XGRAD_JOBS:-$(nproc)}
build_dir=${XGRAD_BUILD_DIR:-build}

"$root/scripts/deps.sh"
echo "==> configure ($build_dir, Release)"
cmake -S "$root" -B "$build_dir" -DCMAKE_BUILD_TYPE=Release
echo "==> build demo_autograd"
cmake --build "$build_dir" --parallel "$jobs" --target demo_autograd
echo "==> run"
"$build_dir/examples/demo_autograd" "$@"
