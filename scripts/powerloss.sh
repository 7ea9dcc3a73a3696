#!/usr/bin/env bash
# The long power-loss run: test/integration/powerloss{,-cluster}.test.ts with ROUNDS rounds per load shape and
# fault kind (drop / meta / random), for ours and the real etcd 3.4, single member and 3-member cluster.
#   scripts/powerloss.sh [ROUNDS]            (default 200; ~5-15 s a round on these machines)
# POWERLOSS_SHAPES, POWERLOSS_FAULTS and POWERLOSS_OURS_ONLY=1 narrow it down; a failing round prints
# its seed. Needs /dev/fuse, fusermount and python3-fusepy (.ci/run installs them).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-200}"
[[ "$rounds" =~ ^[0-9]+$ ]] || { echo "usage: $0 [ROUNDS]" >&2; exit 2; }
npx tsc -p tsconfig.json
# Each test runs its rounds one after another: allow ~60 s a round.
POWERLOSS_ROUNDS="$rounds" npx vitest run test/integration/powerloss.test.ts test/integration/powerloss-cluster.test.ts --testTimeout=$((rounds * 60000 + 60000))
