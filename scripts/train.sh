#!/usr/bin/env bash
# scripts/train.sh: the main job, on a fresh Debian machine or this one.
#
# Installs what is missing (scripts/deps.sh), builds Release in build/, fetches the corpus
# (Moby-Dick, scripts/get_corpus.sh -> data/moby_dick.txt), trains the `tiny` character-level
# GPT for a few minutes (examples/train_lm), saves a checkpoint in checkpoints/tiny/ and prints
# a sample continuing "Call me". Flags after the script go to `train_lm train` and override the
# defaults below, e.g.
#   scripts/train.sh --preset small --steps 4000 --time-budget 0
#   scripts/train.sh --resume                      # continue the last run
#   scripts/train.sh --arch llama                  # the Llama of the same size (llama-tiny), the
#                                                  # same budget, in checkpoints/llama-tiny/
#
# Environment: XGRAD_JOBS (default: nproc), XGRAD_BUILD_DIR (build), XGRAD_SKIP_DEPS=1,
# XGRAD_TRAIN_SECONDS (time budget of the default run, 240).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
jobs=${XGRAD_JOBS:-$(nproc)}
build_dir=${XGRAD_BUILD_DIR:-build}
seconds=${XGRAD_TRAIN_SECONDS:-240}
preset=tiny
for ((i = 1; i <= $#; ++i)); do  # --arch llama / --arch=llama: its preset and directory
  if [[ "${!i}" == --arch=llama || ("${!i}" == --arch && "${*:i+1:1}" == llama) ]]; then preset=llama-tiny; fi
done
checkpoints=checkpoints/$preset

if [[ "${XGRAD_SKIP_DEPS:-0}" != 1 ]]; then "$root/scripts/deps.sh" --train; fi
echo "==> configure ($build_dir, Release)"
cmake -S "$root" -B "$build_dir" -DCMAKE_BUILD_TYPE=Release >/dev/null
echo "==> build train_lm"
cmake --build "$build_dir" --parallel "$jobs" --target train_lm
echo "==> corpus"
"$root/scripts/get_corpus.sh"

trainer="$build_dir/examples/train_lm/train_lm"
echo "==> train (preset $preset, up to ${seconds}s; checkpoints in $checkpoints)"
"$trainer" train --preset "$preset" --steps 8000 --time-budget "$seconds" --eval-interval 250 \
  --checkpoint-dir "$checkpoints" "$@"

echo "==> sample"
"$trainer" generate --checkpoint "$checkpoints" --prompt "Call me" --max-new-tokens 300 \
  --temperature 0.8 --top-k 20
