#!/usr/bin/env bash
# bench.sh — the one command: ours vs the real etcd 3.4.23 on etcd's own benchmark tool.
#
#   scripts/bench/bench.sh --quick            # first look: one repeat, short runs (~10 min)
#   scripts/bench/bench.sh                    # full battery, medians of 3 repeats
#   scripts/bench/bench.sh --cases='put-*' --repeats=5
#   scripts/bench/bench.sh --list             # the case names
#
# Steps: (1) build etcd's `benchmark` tool offline into $BENCH_WORK (build-benchmark.sh), (2) compile a
# snapshot of this tree (src + scripts) into $BENCH_WORK/ours, so edits or rebuilds of dist/ by others
# during the run do not change what is measured (--no-build reuses the last snapshot), (3) run the
# battery (run.ts). Tables go to stdout and $BENCH_WORK/results/<time>/results.md.
# Env: BENCH_WORK (default ${TMPDIR:-/tmp}/etcd-bench-build; must be outside the repository).
set -euo pipefail

root="$(cd -P "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
export BENCH_WORK=${BENCH_WORK:-${TMPDIR:-/tmp}/etcd-bench-build}
case "$BENCH_WORK/" in "$root"/*) echo "bench: BENCH_WORK must be outside the repository" >&2; exit 1 ;; esac

build=1
args=()
for a in "$@"; do
  if [[ "$a" == --no-build ]]; then build=0; else args+=("$a"); fi
done

"$root/scripts/bench/build-benchmark.sh" >/dev/null

snap="$BENCH_WORK/ours"
if [[ $build == 1 || ! -f "$snap/dist/scripts/bench/run.js" ]]; then
  echo "bench: compiling a snapshot of $root into $snap" >&2
  rm -rf "$snap.tmp" && mkdir -p "$snap.tmp"
  # tsc emits even when some file of a work in progress has type errors; only missing outputs are fatal.
  (cd "$root" && ./node_modules/.bin/tsc -p tsconfig.json --outDir "$snap.tmp/dist" --sourceMap true) >"$snap.tmp/build.log" 2>&1 || true
  for f in dist/src/main.js dist/scripts/bench/run.js; do
    [[ -f "$snap.tmp/$f" ]] || { echo "bench: snapshot build failed ($f missing):" >&2; cat "$snap.tmp/build.log" >&2; exit 1; }
  done
  cp -r "$root/proto" "$snap.tmp/proto"
  # Ours runs through its launcher (bin/etcd: the node flags users get); it finds dist/ beside it.
  mkdir -p "$snap.tmp/bin" && cp "$root/bin/etcd" "$snap.tmp/bin/etcd"
  ln -s "$root/node_modules" "$snap.tmp/node_modules"
  rm -rf "$snap" && mv "$snap.tmp" "$snap"
  (cd "$root" && git rev-parse --short HEAD 2>/dev/null && git status --short src | head -50) >"$snap/REVISION" || true
fi

# Say which code is measured: --no-build measures whatever the last build left in $snap.
rev="$(head -n 1 "$snap/REVISION" 2>/dev/null || true)"
head_rev="$(cd "$root" && git rev-parse --short HEAD 2>/dev/null || true)"
echo "bench: ours is the snapshot of ${rev:-an unknown revision} in $snap" >&2
if [[ $build == 0 && "$rev" != "$head_rev" ]]; then
  echo "bench: warning: --no-build reuses that snapshot; HEAD is ${head_rev:-unknown} (build without --no-build to measure it)" >&2
fi

exec node "$snap/dist/scripts/bench/run.js" "${args[@]}"
