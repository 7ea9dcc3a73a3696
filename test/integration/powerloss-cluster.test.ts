// Power loss (issue 50) in a 3-member cluster, ours and the real etcd alike: see
// test/powerloss/cluster_rounds.ts. POWERLOSS_ROUNDS and POWERLOSS_FAULTS as in powerloss.test.ts.
import { describe, expect, it } from 'vitest';
import { clusterPowerLossRound, type ClusterFault } from '../powerloss/cluster_rounds';
import type { PowerLossMode } from '../helpers/powerloss';
import { powerLossServers } from '../powerloss/servers';

const ROUNDS = Number(process.env['POWERLOSS_ROUNDS'] ?? '1');
const MODES: PowerLossMode[] = ['drop', 'meta', 'random'];
const SERVERS = powerLossServers().map((s) => [s.name, s] as const);
const FAULTS = (process.env['POWERLOSS_FAULTS'] ?? 'leader,two,all,snapshot-follower,member-add').split(',') as ClusterFault[];

describe.each(SERVERS)('power loss in a 3-member cluster: %s', (_name, server) => {
  for (const fault of FAULTS) {
    for (const mode of MODES) {
      it(`${fault}, ${mode}: every acknowledged write is on every member, HashKV agrees`, { timeout: 90_000 + ROUNDS * 60_000 }, async () => {
        for (let round = 0; round < ROUNDS; round++) {
          const seed = 1000 * round + 100 + FAULTS.indexOf(fault) * 10 + MODES.indexOf(mode);
          const r = await clusterPowerLossRound({ server, fault, mode, seed });
          expect(r.lost, `round ${round} (seed ${seed}): ${r.acked} acknowledged`).toEqual([]);
        }
      });
    }
  }
});

