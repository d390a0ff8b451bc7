#!/usr/bin/env bash
# scripts/hash_jobs.sh: fingerprints of fixed-seed train_lm jobs, to prove that a refactor
# changes no numbers. Run it before and after a change and diff the two outputs: identical
# output means every weight, every AdamW moment and every sampled character is the same.
#
#   scripts/hash_jobs.sh [path/to/train_lm] > before.txt    # default build/examples/train_lm/train_lm
#   ... change, rebuild ...
#   scripts/hash_jobs.sh > after.txt && diff before.txt after.txt
#
# The jobs, on a corpus the script writes itself (no network; v2 reads its fixture):
#   char        `train --preset tiny` (dropout 0.1) for 200 steps, a checkpoint every 100
#   accum       the same with --batch-size 8 --grad-accum 2
#   resume      `train --resume --steps 300` continuing a copy of `char`
#   bpe         `tokenize --tokenizer bpe` (the token ids) and 60 steps with that tokenizer
#   generate    `generate` from `char`, with and without the KV cache, greedy and sampled
#   v2          `train --resume` of tests/fixtures/train_lm_v2 (an old checkpoint format) to its step 6
# For every safetensors file of the final checkpoints it prints one line per tensor (name,
# dtype, shape, sha256 of its bytes): the model's weights and the optimizer's exp_avg,
# exp_avg_sq and step. The files themselves are not hashed: their metadata holds a random
# checkpoint id and the elapsed time. Also printed: the evaluation lines of each training log
# (losses every 10 steps, evaluations, samples; timings removed) and the generated texts. Every job runs on one
# thread (--threads 1), so the result does not depend on the machine's core count.
#
# Needs python3 (standard library only) to read the safetensors headers.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
trainer=$(realpath "${1:-$root/build/examples/train_lm/train_lm}")
py=${XGRAD_PYTHON:-python3}
[[ -x "$trainer" ]] || { echo "hash_jobs.sh: no train_lm at $trainer (build the train_lm target)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"

# ---- the corpus: 4000 lines of words drawn by a fixed linear congruential generator
awk 'BEGIN {
  n = split("the whale sea ship captain white harpoon deck sail wind man old boat water call me " \
            "Ishmael, some years ago never mind how long precisely having little or no money in my " \
            "purse and nothing particular to interest on shore I thought would about see watery part " \
            "of world. It is a way have driving off spleen regulating circulation", w, " ")
  s = 12345
  for (line = 0; line < 4000; ++line) {
    out = ""
    for (k = 0; k < 9; ++k) { s = (s * 1103515245 + 12345) % 2147483648; out = out (k ? " " : "") w[int(s / 65536) % n + 1] }
    print out "."
  }
}' > corpus.txt

# ---- the jobs
common=(--data corpus.txt --no-progress --threads 1 --seed 7 --eval-iters 2 --sample-length 40)
tiny=(--preset tiny --warmup 20 --eval-interval 100)
log() { # a training log without what depends on the machine (times, speed, memory available)
  sed -E 's/^\[[^]]*\] \[[a-z]+\] //; s/  [0-9.]+[kM]? tok\/s .*$//' "$1" | grep -v '^estimated memory' | cat -v
}
run_train() { # name, then flags
  local name=$1
  shift
  "$trainer" train "${common[@]}" "$@" > "$name.log" 2>&1 || { cat "$name.log" >&2; exit 1; }
}

run_train char "${tiny[@]}" --steps 200 --checkpoint-dir char
run_train accum "${tiny[@]}" --steps 200 --batch-size 8 --grad-accum 2 --checkpoint-dir accum
cp -r char resume
run_train resume_run --checkpoint-dir resume --resume --steps 300
"$trainer" tokenize --tokenizer bpe --bpe-merges 200 --data corpus.txt > bpe_ids.txt
run_train bpe --tokenizer bpe --bpe-merges 200 --context-length 32 --emb-dim 32 --n-heads 2 --n-layers 1 \
  --batch-size 8 --steps 60 --warmup 5 --eval-interval 30 --checkpoint-dir bpe
mkdir v2
cp -r "$root/tests/fixtures/train_lm_v2/step_00000004" v2/
echo step_00000004 > v2/latest
for i in $(seq 60); do echo "Call me Ishmael. Some years ago, never mind how long."; done > ishmael.txt
"$trainer" train --data ishmael.txt --checkpoint-dir v2 --resume --no-progress --threads 1 > v2.log 2>&1 ||
  { cat v2.log >&2; exit 1; }
gen() { "$trainer" generate --checkpoint char --threads 1 --prompt "call me" --max-new-tokens 120 "$@"; }

# ---- the fingerprints
tensors() { # every tensor of a safetensors file: name dtype shape sha256
  "$py" - "$1" <<'EOF'
import hashlib, json, struct, sys
with open(sys.argv[1], "rb") as f:
    (n,) = struct.unpack("<Q", f.read(8))
    header = json.loads(f.read(n))
    data = f.read()
for name in sorted(k for k in header if k != "__metadata__"):
    t = header[name]
    begin, end = t["data_offsets"]
    shape = "x".join(map(str, t["shape"])) or "scalar"
    print(f"  {name} {t['dtype']} {shape} {hashlib.sha256(data[begin:end]).hexdigest()}")
EOF
}
for job in char accum resume bpe v2; do
  latest=$(cat "$job/latest")
  for file in model.safetensors train_state.safetensors; do
    echo "== $job/$latest/$file"
    tensors "$job/$latest/$file"
  done
done
for job in char accum resume_run bpe v2; do
  echo "== log of $job"
  log "$job.log"
done
echo "== tokenize --tokenizer bpe --bpe-merges 200: $(wc -w < bpe_ids.txt) ids, sha256 $(sha256sum < bpe_ids.txt | cut -d' ' -f1)"
echo "== generate --temperature 0"
gen --temperature 0
echo "== generate --temperature 0 --no-kv-cache"
gen --temperature 0 --no-kv-cache
echo "== generate --temperature 0.8 --top-k 20 --seed 11"
gen --temperature 0.8 --top-k 20 --seed 11
