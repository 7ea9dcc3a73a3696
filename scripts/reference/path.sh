#!/usr/bin/env bash
# Prints the bin directory of a reference etcd line built by scripts/reference/install.sh
# (etcd, etcdctl, etcdutl, benchmark), e.g. `"$(scripts/reference/path.sh 3.7)/etcdctl" version`.
# Fails, saying so, when that line has not been built.
set -euo pipefail
line="${1:?usage: scripts/reference/path.sh 3.6|3.7}"
bin="${ETCD_REFERENCE_CACHE:-/var/cache/etcd-ts-reference}/$line/bin"
if [ ! -x "$bin/etcd" ]; then
  echo "reference etcd $line is not built ($bin/etcd missing): run bash scripts/reference/install.sh" >&2
  exit 1
fi
echo "$bin"
