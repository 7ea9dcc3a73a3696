// Power loss (issue 50): acknowledged writes survive it, for ours and the real etcd alike. Each
// round runs a load on a member whose data directory is on a disk that loses what was not fsynced
// (test/powerloss/unsynced_fs.py), cuts the power, and checks every acknowledged write after the
// restart. POWERLOSS_ROUNDS sets the rounds per load shape and fault kind (scripts/powerloss.sh
// runs 200); the suite runs a few.
import { describe, expect, it } from 'vitest';
import { powerLossRound, type LoadShape } from '../powerloss/rounds';
import type { PowerLossMode } from '../helpers/powerloss';

const ROUNDS = Number(process.env['POWERLOSS_ROUNDS'] ?? '1');
const SHAPES = (process.env['POWERLOSS_SHAPES'] ?? 'one-writer,writers-16,defrag,compact-defrag,leases').split(',') as LoadShape[];
const MODES: PowerLossMode[] = ['drop', 'meta', 'random'];
const SERVERS: Array<[string, string | undefined]> = [
  ['ours', undefined],
  ...(process.env['POWERLOSS_OURS_ONLY'] ? [] : [['etcd 3.4', '/usr/bin/etcd'] as [string, string]]),
];

describe.each(SERVERS)('power loss: %s', (_name, bin) => {
  for (const shape of SHAPES) {
    for (const mode of MODES) {
      it(`${shape}, ${mode}: every acknowledged write survives`, { timeout: 60_000 + ROUNDS * 30_000 }, async () => {
        for (let round = 0; round < ROUNDS; round++) {
          const seed = 1000 * round + SHAPES.indexOf(shape) * 10 + MODES.indexOf(mode);
          const r = await powerLossRound({ bin, shape, mode, seed });
          expect(r.lost, `round ${round} (seed ${seed}): ${r.acked} acknowledged`).toEqual([]);
          expect(r.revisionAfter).toBeGreaterThanOrEqual(r.maxAckedRevision);
        }
      });
    }
  }
});
