#!/usr/bin/env bash
# build-benchmark.sh — builds etcd 3.4.23's official load generator (tools/benchmark) offline from
# Debian bookworm packages, into a directory OUTSIDE this repository (its code never enters the repo).
#
#   * golang-etcd-server-dev ships the etcd 3.4.23 Go tree in /usr/share/gocode but not tools/, so the
#     benchmark sources come from the Debian source tarball (apt-get source --download-only through a
#     private deb-src list: the system's apt configuration is left alone).
#   * Every import (clientv3, pkg/report, cobra, pb.v1, x/time/rate, ...) resolves from /usr/share/gocode
#     in GOPATH mode: GO111MODULE=off GOPATH=$WORK/gopath:/usr/share/gocode GOPROXY=off.
#
#   * It also builds scripts/bench/null_put_server (ours: a gRPC KV server that only appends each put to a
#     file and fdatasyncs it) into $BENCH_WORK/null-put-server, against the same packages; run.ts
#     measures it beside put-1c to show how near the disk's floor a server can come at all.
#
# Usage:  scripts/bench/build-benchmark.sh      (idempotent; FORCE=1 rebuilds)
# Env:    BENCH_WORK=${TMPDIR:-/tmp}/etcd-bench-build   FORCE=1   SKIP_APT=1 (never call apt-get)
# Output: the path of the benchmark binary on stdout ($BENCH_WORK/benchmark)
set -euo pipefail

WORK=${BENCH_WORK:-${TMPDIR:-/tmp}/etcd-bench-build}
ETCD_VER=3.4.23
GOCODE=/usr/share/gocode
GP="$WORK/gopath"
PKG="$GP/src/go.etcd.io/etcd"
BIN="$WORK/benchmark"
NULL_BIN="$WORK/null-put-server"

repo_root="$(cd -P "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
case "$WORK/" in "$repo_root"/*) echo "build-benchmark: BENCH_WORK must be outside the repository" >&2; exit 1 ;; esac
NULL_SRC="$repo_root/scripts/bench/null_put_server/main.go"

# Built in a GOPATH of its own (the benchmark's is recreated below), whenever its source is newer.
build_null_server() {
  if [[ -x "$NULL_BIN" && "$NULL_BIN" -nt "$NULL_SRC" && "${FORCE:-0}" != 1 ]]; then return 0; fi
  local gp="$WORK/null-gopath"
  rm -rf "$gp" && mkdir -p "$gp/src/nullputserver"
  cp "$NULL_SRC" "$gp/src/nullputserver/main.go"
  (cd "$gp/src/nullputserver" && env GO111MODULE=off GOPATH="$gp:$GOCODE" GOPROXY=off GOFLAGS= \
      GOCACHE="$WORK/gocache" CGO_ENABLED=0 go build -o "$NULL_BIN.tmp" .) >&2
  mv "$NULL_BIN.tmp" "$NULL_BIN"
  echo "build-benchmark: built $NULL_BIN" >&2
}

if [[ -x "$BIN" && "${FORCE:-0}" != 1 ]]; then
  build_null_server
  echo "$BIN"
  exit 0
fi
mkdir -p "$WORK"

if ! command -v go >/dev/null || [[ ! -d $GOCODE/src/go.etcd.io/etcd/clientv3 ]]; then
  if [[ "${SKIP_APT:-0}" == 1 ]]; then echo "build-benchmark: need golang-go + golang-etcd-server-dev" >&2; exit 1; fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq golang-go golang-etcd-server-dev >/dev/null
fi

# The source tarball: reuse one already fetched (by this script or the conformance e2e build).
TARBALL=""
for d in "$WORK/aptsrc" "${TMPDIR:-/tmp}/etcd-e2e/aptsrc" /tmp/etcd-e2e/aptsrc; do
  if [[ -f "$d/etcd_${ETCD_VER}.orig.tar.gz" ]]; then TARBALL="$d/etcd_${ETCD_VER}.orig.tar.gz"; break; fi
done
if [[ -z "$TARBALL" ]]; then
  if [[ "${SKIP_APT:-0}" == 1 ]]; then echo "build-benchmark: no etcd_${ETCD_VER}.orig.tar.gz and SKIP_APT=1" >&2; exit 1; fi
  APTSRC="$WORK/aptsrc"; mkdir -p "$APTSRC/lists/partial"
  echo 'deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bookworm main' > "$APTSRC/sources.list"
  APTO=(-o "Dir::Etc::SourceList=$APTSRC/sources.list" -o "Dir::Etc::SourceParts=/dev/null"
        -o "Dir::State::Lists=$APTSRC/lists" -o "APT::Sandbox::User=root")
  apt-get "${APTO[@]}" update -qq
  (cd "$APTSRC" && apt-get "${APTO[@]}" source --download-only "etcd=${ETCD_VER}-4" >/dev/null)
  TARBALL="$APTSRC/etcd_${ETCD_VER}.orig.tar.gz"
fi

rm -rf "$GP" "$WORK/src" && mkdir -p "$PKG/tools" "$WORK/src"
tar xzf "$TARBALL" -C "$WORK/src" "etcd-${ETCD_VER}/tools/benchmark"
cp -r "$WORK/src/etcd-${ETCD_VER}/tools/benchmark" "$PKG/tools/"

cd "$PKG/tools/benchmark"
env GO111MODULE=off GOPATH="$GP:$GOCODE" GOPROXY=off GOFLAGS= \
    GOCACHE="$WORK/gocache" CGO_ENABLED=0 \
    go build -o "$BIN.tmp" . >&2
mv "$BIN.tmp" "$BIN"
echo "build-benchmark: built $BIN" >&2
build_null_server
echo "$BIN"
