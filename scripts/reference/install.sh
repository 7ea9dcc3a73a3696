#!/usr/bin/env bash
# Builds the real etcd that the tests compare with, from Go modules at the versions pinned in
# scripts/reference/v3.6 and scripts/reference/v3.7 (each a small Go module: go.mod, go.sum, a
# tools.go that imports the main packages): etcd, etcdctl, etcdutl and etcd's benchmark tool (3.6's
# for both lines: no 3.7 module the proxy serves holds it), with
# `go build -trimpath -mod=readonly` (the committed go.sum decides every byte of source), CGO off
# as etcd's own release builds do. The module source comes through the machine's Go settings
# (`go env GOPROXY`).
#
# Layout: ${ETCD_REFERENCE_CACHE:-/var/cache/etcd-ts-reference}/<line>/bin/{etcd,etcdctl,etcdutl,benchmark}
# with <line> 3.6 or 3.7; <line>/VERSION holds the exact version (v3.6.17) and <line>/KEY a hash of
# go.mod, go.sum, the Go files of the wrapper module and the Go version. A line whose KEY matches
# is left as it is (seconds); otherwise it is rebuilt into a temporary directory that then replaces
# it. `scripts/reference/path.sh <line>` prints the bin directory.
#
# Usage: scripts/reference/install.sh [3.6|3.7 ...]   (default: every line)
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
cache="${ETCD_REFERENCE_CACHE:-/var/cache/etcd-ts-reference}"
# Bump when the way the binaries are built changes, so cached ones are rebuilt.
scheme=1

command -v go >/dev/null 2>&1 || PATH="$PATH:/usr/local/go/bin"
command -v go >/dev/null 2>&1 || { echo "reference etcd: no go command on PATH (nor /usr/local/go/bin)" >&2; exit 1; }

lines=("$@")
[ ${#lines[@]} -gt 0 ] || lines=(3.6 3.7)

mkdir -p "$cache"
exec 9>"$cache/.lock"
flock 9

pinned_version() { # the version of go.etcd.io/etcd/server/v3 in a go.mod
  awk '$1 == "go.etcd.io/etcd/server/v3" && $2 ~ /^v/ { print $2; exit }' "$1/go.mod"
}

cache_key() { # hash of everything that decides the build
  (
    cd "$1"
    echo "scheme $scheme"
    go version
    find . -type f \( -name go.mod -o -name go.sum -o -name '*.go' \) -print0 | LC_ALL=C sort -z | xargs -0 sha256sum
  ) | sha256sum | cut -d' ' -f1
}

report() { # what is in a line's bin dir
  local bin="$1/bin"
  echo "  $bin"
  "$bin/etcd" --version | sed 's/^/    etcd: /'
  "$bin/etcdctl" version | sed -n 1p | sed 's/^/    /'
  "$bin/etcdutl" version | sed -n 1p | sed 's/^/    /'
  echo "    benchmark: $("$bin/benchmark" --help 2>&1 | sed -n 1p)"
}

for line in "${lines[@]}"; do
  mod="$here/v$line"
  [ -f "$mod/go.mod" ] || { echo "reference etcd: no module for $line ($mod/go.mod)" >&2; exit 1; }
  version="$(pinned_version "$mod")"
  # etcd's benchmark tool is in no 3.7 module the proxy serves: a line without it takes 3.6's.
  bench_mod="$mod"
  grep -q 'tools/benchmark' "$mod/tools.go" || bench_mod="$here/v3.6"
  key="$( (cache_key "$mod"; cache_key "$bench_mod") | sha256sum | cut -d' ' -f1)"
  dest="$cache/$line"
  bins=(etcd etcdctl etcdutl benchmark)

  complete=1
  for b in "${bins[@]}"; do [ -x "$dest/bin/$b" ] || complete=0; done
  if [ "$complete" = 1 ] && [ "$(cat "$dest/KEY" 2>/dev/null)" = "$key" ]; then
    echo "reference etcd $line ($version): cached"
    report "$dest"
    continue
  fi

  echo "reference etcd $line ($version): building from Go modules ($(go version | cut -d' ' -f3))"
  start=$SECONDS
  tmp="$(mktemp -d "$cache/.build-$line.XXXXXX")"
  trap 'rm -rf "$tmp"' EXIT
  (
    cd "$mod"
    export CGO_ENABLED=0
    go build -trimpath -mod=readonly -o "$tmp/bin/etcd" go.etcd.io/etcd/server/v3
    go build -trimpath -mod=readonly -o "$tmp/bin/etcdctl" go.etcd.io/etcd/etcdctl/v3
    go build -trimpath -mod=readonly -o "$tmp/bin/etcdutl" go.etcd.io/etcd/etcdutl/v3
    cd "$bench_mod"
    go build -trimpath -mod=readonly -o "$tmp/bin/benchmark" go.etcd.io/etcd/v3/tools/benchmark
  )
  echo "$version" >"$tmp/VERSION"
  echo "$key" >"$tmp/KEY"
  chmod 755 "$tmp"
  rm -rf "$dest.old"
  [ ! -e "$dest" ] || mv "$dest" "$dest.old"
  mv "$tmp" "$dest"
  rm -rf "$dest.old"
  trap - EXIT
  echo "reference etcd $line ($version): built in $((SECONDS - start))s"
  report "$dest"
done
