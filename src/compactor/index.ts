// Auto-compaction (`--auto-compaction-mode`, `--auto-compaction-retention`). The server creates
// one compactor at start when retention is non-zero, runs it, pauses it while a follower and
// resumes it as leader, as etcd does.
import { PeriodicCompactor } from './periodic';
import { RevisionCompactor } from './revision';
import type { CompactionMode, Compactor, CompactorOptions } from './types';

export { periodicSchedule, PeriodicCompactor } from './periodic';
export type { PeriodicSchedule } from './periodic';
export { RevisionCompactor, REVISION_CHECK_INTERVAL_MS } from './revision';
export { realClock } from './clock';
export type { CompactorClock, TimerHandle } from './clock';
export { isCompactedError } from './errors';
export type { Compactable, Compactor, CompactorOptions, CompactionMode, RevGetter } from './types';

/** A compactor for `mode`, or null when the mode's retention is 0 (auto-compaction off). */
export function createCompactor(mode: CompactionMode, opts: CompactorOptions): Compactor | null {
  switch (mode) {
    case 'periodic':
      if (opts.retentionMs === 0) return null;
      return new PeriodicCompactor(opts.retentionMs, opts.target, opts.revs, opts.log, opts.clock);
    case 'revision':
      if (opts.retentionRevisions === 0) return null;
      return new RevisionCompactor(opts.retentionRevisions, opts.target, opts.revs, opts.log, opts.clock);
    default: {
      const bad: never = mode;
      throw new Error(`unsupported compaction mode ${String(bad)}`);
    }
  }
}
