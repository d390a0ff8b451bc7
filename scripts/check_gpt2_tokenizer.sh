#!/usr/bin/env bash
# scripts/check_gpt2_tokenizer.sh: xgrad's GPT-2 tokenizer against gpt-3-encoder's Encoder.js
# on whole files (default: all of Moby-Dick): the ids of `train_lm tokenize --tokenizer gpt2`
# and of scripts/gpt2_encode.js (Encoder.js run by the machine's node) must be identical.
#
#   scripts/check_gpt2_tokenizer.sh [--build DIR] [FILE...]
#
# Needs data/gpt2/ (scripts/get_gpt2_vocab.sh), node (Debian nodejs) and a built train_lm
# (default build/examples/train_lm/train_lm). Prints token counts and train_lm's CPU time.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$root/build
files=()
while (( $# )); do
  case "$1" in
    --build) build=$2; shift 2 ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) files+=("$1"); shift ;;
  esac
done
(( ${#files[@]} )) || files=("$root/data/moby_dick.txt")
die() { echo "check_gpt2_tokenizer.sh: error: $*" >&2; exit 1; }
node=$(command -v node || true)
[[ -n "$node" ]] || die "node not found (Debian package nodejs)"
train_lm=$build/examples/train_lm/train_lm
[[ -x "$train_lm" ]] || die "$train_lm not built (cmake --build $build --target train_lm)"
[[ -f "$root/data/gpt2/Encoder.js" ]] || die "no data/gpt2/ (run scripts/get_gpt2_vocab.sh)"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/xgrad-gpt2check.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
status=0
for f in "${files[@]}"; do
  [[ -f "$f" ]] || die "$f not found"
  "$node" "$root/scripts/gpt2_encode.js" "$f" "$root/data/gpt2" > "$tmp/js.txt"
  cpu=$( { /usr/bin/time -f '%U %S' "$train_lm" tokenize --tokenizer gpt2 \
             --gpt2-vocab "$root/data/gpt2" --data "$f" > "$tmp/xgrad.txt"; } 2>&1 | tail -n 1)
  n=$(wc -w < "$tmp/js.txt")
  if cmp -s "$tmp/js.txt" "$tmp/xgrad.txt"; then
    echo "ok: $f: $n tokens, identical ids (train_lm tokenize: ${cpu% *} s user, ${cpu#* } s sys)"
  else
    echo "DIFFERENT: $f: Encoder.js $n tokens, train_lm $(wc -w < "$tmp/xgrad.txt")" >&2
    status=1
  fi
done
exit $status
