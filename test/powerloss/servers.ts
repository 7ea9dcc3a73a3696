// The servers the power-loss tests run, ours first, then the real etcd of each line named in
// POWERLOSS_REFERENCES (default 3.4,3.6: Debian's 3.4.23 and the pinned 3.6 of
// test/helpers/reference.ts; 3.7 can be added), none with POWERLOSS_OURS_ONLY=1.
import { referenceEtcd, type ReferenceLine } from '../helpers/reference';

export interface PowerLossServer {
  readonly name: string;
  /** undefined: ours. */
  readonly bin: string | undefined;
  /** Flags that make snapshots (and the leader's snapshot to a lagging follower) come soon. */
  readonly snapshotArgs: readonly string[];
  /** Writes a follower must miss before the leader sends it a snapshot rather than entries. */
  readonly writesPastCatchup: number;
}

const OURS: PowerLossServer = {
  name: 'ours',
  bin: undefined,
  snapshotArgs: ['--snapshot-count=100', '--experimental-snapshot-catchup-entries=50'],
  writesPastCatchup: 400,
};

function reference(line: string): PowerLossServer {
  if (line === '3.4') {
    // 3.4 keeps 5000 entries past a snapshot for followers, not configurable there.
    return { name: 'etcd 3.4', bin: '/usr/bin/etcd', snapshotArgs: ['--snapshot-count=100'], writesPastCatchup: 5_300 };
  }
  if (line !== '3.6' && line !== '3.7') throw new Error(`POWERLOSS_REFERENCES: no etcd line ${line} (3.4, 3.6, 3.7)`);
  const ref = referenceEtcd(line as ReferenceLine);
  // 3.6 names the flag experimental (and warns); 3.7 dropped that name.
  const catchup = line === '3.6' ? '--experimental-snapshot-catchup-entries=50' : '--snapshot-catchup-entries=50';
  return { name: `etcd ${ref.version.slice(1)}`, bin: ref.etcd, snapshotArgs: ['--snapshot-count=100', catchup], writesPastCatchup: 400 };
}

export function powerLossServers(): PowerLossServer[] {
  if (process.env['POWERLOSS_OURS_ONLY']) return [OURS];
  const lines = (process.env['POWERLOSS_REFERENCES'] ?? '3.4,3.6').split(',').filter((l) => l !== '');
  return [OURS, ...lines.map(reference)];
}
