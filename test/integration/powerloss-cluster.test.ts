// Power loss (issue 50) in a 3-member cluster, ours and the real etcd alike: see
// test/powerloss/cluster_rounds.ts. POWERLOSS_ROUNDS and POWERLOSS_FAULTS as in powerloss.test.ts.
import { describe, expect, it } from 'vitest';
import { clusterPowerLossRound, type ClusterFault } from '../powerloss/cluster_rounds';
import type { PowerLossMode } from '../helpers/powerloss';

const ROUNDS = Number(process.env['POWERLOSS_ROUNDS'] ?? '1');
const MODES: PowerLossMode[] = ['drop', 'meta', 'random'];
const SERVERS: Array<[string, string | undefined]> = [
  ['ours', undefined],
  ...(process.env['POWERLOSS_OURS_ONLY'] ? [] : [['etcd 3.4', '/usr/bin/etcd'] as [string, string]]),
];
const FAULTS = (process.env['POWERLOSS_FAULTS'] ?? 'leader,two,all,snapshot-follower,member-add').split(',') as ClusterFault[];

describe.each(SERVERS)('power loss in a 3-member cluster: %s', (_name, bin) => {
  for (const fault of FAULTS) {
    for (const mode of MODES) {
      it(`${fault}, ${mode}: every acknowledged write is on every member, HashKV agrees`, { timeout: 90_000 + ROUNDS * 60_000 }, async () => {
        for (let round = 0; round < ROUNDS; round++) {
          const seed = 1000 * round + 100 + FAULTS.indexOf(fault) * 10 + MODES.indexOf(mode);
          const r = await clusterPowerLossRound({ bin, fault, mode, seed });
          expect(r.lost, `round ${round} (seed ${seed}): ${r.acked} acknowledged`).toEqual([]);
        }
      });
    }
  }
});

