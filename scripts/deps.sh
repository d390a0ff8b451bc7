#!/usr/bin/env bash
# scripts/deps.sh: install xgrad's build dependencies from Debian, only what is missing.
#
#   scripts/deps.sh           compiler, CMake, OpenBLAS, GoogleTest, Google Benchmark,
#                             OpenMPI (xgrad::distributed, mpirun), ...
#   scripts/deps.sh --torch   also python3-torch (fixture regeneration and benchmarks against
#                             PyTorch only; the C++ build and tests never need it)
#   scripts/deps.sh --fuzz    also clang-14 and libclang-rt-14-dev (libFuzzer and the sanitizer
#                             runtimes for clang) for scripts/fuzz.sh
#   scripts/deps.sh --format  also clang-format-14 (scripts/format.sh, and its --check in CI)
#   scripts/deps.sh --node    also nodejs (regenerating the GPT-2 tokenizer fixtures and
#                             scripts/check_gpt2_tokenizer.sh only), when no node is on PATH
#   scripts/deps.sh --train   also what scripts/train.sh uses: gnuplot-nox (the loss-curve PNG)
#                             and npm (scripts/get_corpus.sh), the latter only when no npm is on
#                             PATH (the machine's own Node.js may bring one)
#
# Idempotent: asks dpkg-query which packages are missing and runs `apt-get update` plus one
# `apt-get install` only when something is. Uses sudo when not root. XGRAD_SKIP_DEPS=1 skips
# the whole check (for machines where you manage the packages yourself).
set -euo pipefail

packages=(libxsimd-dev libxtensor-dev libxtensor-blas-dev libopenblas-dev libspdlog-dev libgtest-dev
          libgmock-dev libbenchmark-dev libcli11-dev nlohmann-json3-dev cmake g++ make
          libopenmpi-dev openmpi-bin)

for arg in "$@"; do
  case "$arg" in
    --torch) packages+=(python3-torch) ;;
    --fuzz) packages+=(clang-14 libclang-rt-14-dev) ;;
    --format) packages+=(clang-format-14) ;;
    --node) command -v node >/dev/null 2>&1 || packages+=(nodejs) ;;
    --train)
      packages+=(gnuplot-nox)
      command -v npm >/dev/null 2>&1 || packages+=(npm)
      ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "deps.sh: unknown argument '$arg' (try --help)" >&2; exit 2 ;;
  esac
done

if [[ "${XGRAD_SKIP_DEPS:-0}" == 1 ]]; then
  echo "deps: XGRAD_SKIP_DEPS=1, not checking packages"
  exit 0
fi

if ! command -v dpkg-query >/dev/null 2>&1; then
  echo "deps: dpkg-query not found (not a Debian-based system); make sure these are installed:" >&2
  echo "      ${packages[*]}" >&2
  exit 0
fi

missing=()
for pkg in "${packages[@]}"; do
  # "ii" = installed; anything else ("rc", "un", not known) counts as missing.
  status=$(dpkg-query -W -f='${db:Status-Abbrev}' "$pkg" 2>/dev/null || true)
  [[ "$status" == ii* ]] || missing+=("$pkg")
done

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "deps: all ${#packages[@]} packages already installed"
  exit 0
fi

echo "deps: missing: ${missing[*]}"
if [[ $(id -u) -eq 0 ]]; then
  as_root=(env DEBIAN_FRONTEND=noninteractive)
elif command -v sudo >/dev/null 2>&1; then
  as_root=(sudo env DEBIAN_FRONTEND=noninteractive)
else
  echo "deps: not root and no sudo; run as root:" >&2
  echo "      apt-get update && apt-get install -y --no-install-recommends ${missing[*]}" >&2
  exit 1
fi

echo "deps: running: ${as_root[*]} apt-get update"
"${as_root[@]}" apt-get update
echo "deps: running: ${as_root[*]} apt-get install -y --no-install-recommends ${missing[*]}"
"${as_root[@]}" apt-get install -y --no-install-recommends "${missing[@]}"
echo "deps: installed ${missing[*]}"
