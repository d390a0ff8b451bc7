#!/usr/bin/env bash
# scripts/check_architecture.sh: the layer table of docs/architecture.md against the build.
#
#   scripts/check_architecture.sh [DOC [ROOT]]     (defaults: docs/architecture.md, the repo)
#   scripts/check_architecture.sh --self-test      runs itself on doctored copies: each must fail
#
# The doc's table whose header has the columns "area" and "depends on" lists, per area, the
# xgrad libraries it links (`xgrad::core, xgrad::io`; "nothing" for none). The build's answer
# is each top-level folder of ROOT whose CMakeLists.txt calls xgrad_add_area(<area> ...): every
# xgrad::<name> in that call (DEPENDS and PRIVATE). A folder that builds xgrad_<folder> with
# add_library() instead is an area too; its xgrad::<name> come from its
# target_link_libraries(xgrad_<folder> ...) calls. The check fails, naming the area, when an
# area is in one and not the other, or when the two lists differ (order does not matter).
# Exit status: 0 when they agree, 1 when they differ, 2 on a usage error or an unreadable doc.
# Needs bash, grep, sed and sort only.
set -euo pipefail

script=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")
repo=$(cd "$(dirname "$script")/.." && pwd)

# ---- the doc: "area|xgrad::a xgrad::b" lines, sorted
doc_areas() {
  local doc=$1
  awk -F'|' '
    function trim(s) { gsub(/^[ \t`*]+|[ \t`*]+$/, "", s); return s }
    # the header row of the table: find the columns
    !in_table && /^\|/ {
      area_col = 0; dep_col = 0
      for (i = 2; i < NF; ++i) {
        h = tolower(trim($i))
        if (h == "area") area_col = i
        if (h == "depends on") dep_col = i
      }
      if (area_col && dep_col) { in_table = 1; found = 1; getline; next }  # skip |---|
    }
    in_table && !/^\|/ { in_table = 0 }
    in_table {
      area = trim($area_col)
      deps = ""
      s = $dep_col
      while (match(s, /xgrad::[A-Za-z0-9_]+/)) {
        deps = deps " " substr(s, RSTART, RLENGTH)
        s = substr(s, RSTART + RLENGTH)
      }
      print area "|" deps
    }
    END { if (!found) exit 3 }
  ' "$doc"
}

# the xgrad::<name> words of a text, sorted, unique, on one line
xgrad_words() { grep -oE 'xgrad::[A-Za-z0-9_]+' | sort -u | tr '\n' ' ' | sed 's/ $//'; }

# ---- the build: "area|xgrad::a xgrad::b" lines, sorted
cmake_areas() {
  local root=$1 dir area text call
  for dir in "$root"/*/; do
    dir=${dir%/}
    area=$(basename "$dir")
    [[ -f "$dir/CMakeLists.txt" ]] || continue
    # the file without comments, on one line
    text=$(sed 's/#.*$//' "$dir/CMakeLists.txt" | tr '\n' ' ')
    if [[ $text =~ xgrad_add_area\(([^\)]*)\) ]]; then
      call=${BASH_REMATCH[1]}
      read -r area _ <<<"$call"
      echo "$area|$(xgrad_words <<<"$call")"
    elif [[ $text =~ add_library\([[:space:]]*xgrad_${area}[[:space:]] ]]; then
      call=$(grep -oE "target_link_libraries\([[:space:]]*xgrad_${area}[[:space:]][^)]*\)" <<<"$text" || true)
      echo "$area|$(xgrad_words <<<"$call")"
    fi
  done
}

normalise() {  # "area| a b" -> "area|a b" with the deps sorted
  local line area deps
  while IFS= read -r line; do
    area=${line%%|*}
    deps=${line#*|}
    echo "$area|$(xgrad_words <<<"$deps")"
  done | sort
}

check() {
  local doc=$1 root=$2 status=0 doc_list cmake_list area
  [[ -r "$doc" ]] || { echo "check_architecture: cannot read $doc" >&2; return 2; }
  [[ -d "$root" ]] || { echo "check_architecture: no directory $root" >&2; return 2; }
  if ! doc_list=$(doc_areas "$doc"); then
    echo "check_architecture: $doc has no table with the columns 'area' and 'depends on'" >&2
    return 2
  fi
  doc_list=$(normalise <<<"$doc_list")
  cmake_list=$(cmake_areas "$root" | normalise)
  declare -A in_doc=() in_cmake=()
  while IFS='|' read -r area deps; do [[ -n "$area" ]] && in_doc[$area]=$deps; done <<<"$doc_list"
  while IFS='|' read -r area deps; do [[ -n "$area" ]] && in_cmake[$area]=$deps; done <<<"$cmake_list"
  for area in $(printf '%s\n' "${!in_doc[@]}" "${!in_cmake[@]}" | sort -u); do
    if [[ ! -v in_cmake[$area] ]]; then
      echo "check_architecture: area '$area' is in $doc's table, but no $root/$area/CMakeLists.txt builds it"
      status=1
    elif [[ ! -v in_doc[$area] ]]; then
      echo "check_architecture: area '$area' ($area/CMakeLists.txt) is missing from $doc's table"
      status=1
    elif [[ "${in_doc[$area]}" != "${in_cmake[$area]}" ]]; then
      echo "check_architecture: area '$area' depends on '${in_cmake[$area]:-nothing}' in $area/CMakeLists.txt, but $doc says '${in_doc[$area]:-nothing}'"
      status=1
    fi
  done
  if (( status == 0 )); then
    echo "check_architecture: $doc agrees with the build: ${#in_cmake[@]} areas ($(printf '%s\n' "${!in_cmake[@]}" | sort | tr '\n' ' ' | sed 's/ $//'))"
  fi
  return "$status"
}

# ---- --self-test: the real doc and tree pass; each doctored copy must fail, naming the area
self_test() {
  local tmp failures=0
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/check_architecture.XXXXXX")
  trap 'rm -rf "$tmp"' RETURN
  local doc="$repo/docs/architecture.md"

  # expect <name> <want status> <want text in the output> <doc> <root>
  expect() {
    local name=$1 want=$2 text=$3 out rc=0
    out=$(check "$4" "$5" 2>&1) || rc=$?
    if [[ $rc != "$want" || $out != *"$text"* ]]; then
      echo "self-test '$name': expected status $want and '$text', got status $rc:"
      echo "$out" | sed 's/^/    /'
      failures=$((failures + 1))
    else
      echo "self-test '$name': ok (status $rc)"
    fi
  }
  # a copy of the tree's CMake files only (what the check reads)
  copy_tree() {
    local dst=$1 f
    mkdir -p "$dst"
    for f in "$repo"/*/CMakeLists.txt; do
      mkdir -p "$dst/$(basename "$(dirname "$f")")"
      cp "$f" "$dst/$(basename "$(dirname "$f")")/"
    done
  }
  copy_tree "$tmp/tree"
  expect "the repository" 0 "agrees with the build" "$doc" "$tmp/tree"

  # the doc drops a dependency of io
  sed -E '/^\| *`?io`? *\|/ s/xgrad::core//' "$doc" >"$tmp/no_dep.md"
  expect "a dependency missing from the doc" 1 "area 'io' depends on" "$tmp/no_dep.md" "$tmp/tree"

  # the doc adds one to nn
  sed -E '/^\| *`?nn`? *\|/ s/xgrad::core/xgrad::core, xgrad::text/' "$doc" >"$tmp/extra_dep.md"
  expect "a dependency the build does not have" 1 "area 'nn' depends on" "$tmp/extra_dep.md" "$tmp/tree"

  # the doc's row of optim is gone
  sed -E '/^\| *`?optim`? *\|/d' "$doc" >"$tmp/no_row.md"
  expect "an area missing from the doc" 1 "area 'optim'" "$tmp/no_row.md" "$tmp/tree"

  # a new area in the build that the doc does not list
  copy_tree "$tmp/tree_new"
  mkdir -p "$tmp/tree_new/data"
  printf '# data/: a new area\nxgrad_add_area(data\n  DEPENDS xgrad::core  # tensors\n  xgrad::io)\n' \
    >"$tmp/tree_new/data/CMakeLists.txt"
  expect "an area missing from the doc's table" 1 "area 'data'" "$doc" "$tmp/tree_new"

  # an area of the doc that the build lost
  copy_tree "$tmp/tree_lost"
  rm "$tmp/tree_lost/text/CMakeLists.txt"
  expect "an area missing from the build" 1 "area 'text' is in" "$doc" "$tmp/tree_lost"

  # a dependency changed in CMake (multi-line call, comments) is seen
  copy_tree "$tmp/tree_changed"
  printf 'xgrad_add_area(text # the tokenizers\n  DEPENDS xgrad::core\n  # xgrad::nn is not a dependency: a comment\n  HEADERS nlohmann_json::nlohmann_json PRIVATE xgrad::optim)\n' \
    >"$tmp/tree_changed/text/CMakeLists.txt"
  expect "a dependency added in CMake" 1 "area 'text' depends on" "$doc" "$tmp/tree_changed"

  # a doc without the table
  sed -E 's/depends on/needs/I' "$doc" >"$tmp/no_table.md"
  expect "a doc without the table" 2 "no table" "$tmp/no_table.md" "$tmp/tree"

  if (( failures )); then
    echo "check_architecture --self-test: $failures case(s) FAILED"
    return 1
  fi
  echo "check_architecture --self-test: all cases passed"
}

case "${1:-}" in
  --self-test) self_test ;;
  -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0" ;;
  *)
    (( $# <= 2 )) || { echo "usage: $0 [DOC [ROOT]] | --self-test" >&2; exit 2; }
    check "${1:-$repo/docs/architecture.md}" "${2:-$repo}"
    ;;
esac
