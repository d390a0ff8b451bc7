#!/usr/bin/env bash
# scripts/format.sh: format xgrad's C++ sources with clang-format and the repository's
# .clang-format (Debian's clang-format 14: scripts/deps.sh --format).
#
#   scripts/format.sh           rewrite every tracked .cpp / .h in place
#   scripts/format.sh --check   change nothing; list the files that differ and exit 1 if any do
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

check=0
case "${1:-}" in
  --check) check=1 ;;
  "") ;;
  -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
  *) echo "format.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
esac

fmt=$(command -v clang-format-14 || command -v clang-format || true)
[[ -n "$fmt" ]] || { echo "format.sh: clang-format not found: run scripts/deps.sh --format" >&2; exit 1; }

mapfile -t files < <(git ls-files '*.cpp' '*.h')
if (( ! check )); then
  "$fmt" -i --style=file "${files[@]}"
  echo "format: ${#files[@]} files formatted with $("$fmt" --version | head -1)"
  exit 0
fi
differ=()
for f in "${files[@]}"; do
  "$fmt" --style=file "$f" | cmp -s - "$f" || differ+=("$f")
done
if (( ${#differ[@]} )); then
  echo "format: ${#differ[@]} of ${#files[@]} files differ from .clang-format (run scripts/format.sh):"
  printf '  %s\n' "${differ[@]}"
  exit 1
fi
echo "format: all ${#files[@]} files match .clang-format"
