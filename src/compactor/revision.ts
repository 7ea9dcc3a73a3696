// Revision-count auto-compaction (`--auto-compaction-mode=revision`), as etcd's
// v3compactor.Revision: every 5 minutes compact to (current revision - retention), skipping
// when that is not positive or equals the last successful target.
import assert from 'node:assert';
import { performance } from 'node:perf_hooks';
import { formatGoDurationMs, type Logger } from '../log';
import { realClock, type CompactorClock, type TimerHandle } from './clock';
import { isCompactedError } from './errors';
import { toError } from './periodic';
import type { Compactable, Compactor, RevGetter } from './types';

export const REVISION_CHECK_INTERVAL_MS = 5 * 60 * 1000;

export class RevisionCompactor implements Compactor {
  private timer: TimerHandle | null = null;
  private started = false;
  private stopped = false;
  private paused = false;
  /** Last revision compacted to (successfully or already compacted). */
  private prevRev = 0;

  constructor(
    private readonly retentionRevisions: number,
    private readonly target: Compactable,
    private readonly revGetter: RevGetter,
    private readonly log: Logger,
    private readonly clock: CompactorClock = realClock,
  ) {
    assert(Number.isSafeInteger(retentionRevisions) && retentionRevisions > 0, 'revision retention must be positive');
  }

  run(): void {
    assert(!this.started, 'compactor started twice');
    this.started = true;
    if (!this.stopped) this.wait();
  }

  pause(): void {
    this.paused = true;
  }

  resume(): void {
    this.paused = false;
  }

  stop(): void {
    this.stopped = true;
    if (this.timer !== null) {
      this.clock.clearTimeout(this.timer);
      this.timer = null;
    }
  }

  private wait(): void {
    assert(this.timer === null);
    this.timer = this.clock.setTimeout(() => this.onTick(), REVISION_CHECK_INTERVAL_MS);
  }

  private onTick(): void {
    this.timer = null;
    if (this.stopped) return;
    if (this.paused) {
      this.wait();
      return;
    }
    const current = this.revGetter.currentRevision();
    assert(Number.isSafeInteger(current) && current >= 0, `bad current revision ${current}`);
    const rev = current - this.retentionRevisions;
    if (rev <= 0 || rev === this.prevRev) {
      this.wait();
      return;
    }
    void this.compactTo(rev).then(() => {
      if (!this.stopped) this.wait();
    });
  }

  private async compactTo(rev: number): Promise<void> {
    const retention = this.retentionRevisions;
    this.log.info('starting auto revision compaction', {
      revision: rev,
      'revision-compaction-retention': retention,
    });
    // etcd times this with the wall clock (time.Since), not its injectable clock.
    const startMs = performance.now();
    let err: unknown = null;
    try {
      await this.target.compact({ revision: String(rev), physical: false });
    } catch (e) {
      err = e;
    }
    if (err === null || isCompactedError(err)) {
      this.prevRev = rev;
      this.log.info('completed auto revision compaction', {
        revision: rev,
        'revision-compaction-retention': retention,
        took: formatGoDurationMs(performance.now() - startMs),
      });
    } else {
      this.log.warn('failed auto revision compaction', {
        revision: rev,
        'revision-compaction-retention': retention,
        'retry-interval': formatGoDurationMs(REVISION_CHECK_INTERVAL_MS),
        error: toError(err),
      });
    }
  }
}
