// Time-windowed auto-compaction (`--auto-compaction-mode=periodic`), scheduled as etcd's
// v3compactor.Periodic: sample the current revision every tenth of min(retention, 1h), keep the
// samples of one retention window, and compact to the oldest sample. The first compaction waits a
// full retention; later ones come every min(retention, 1h), and a failure retries one sample
// interval later.
import assert from 'node:assert';
import { formatGoDurationMs, type Logger } from '../log';
import { realClock, type CompactorClock, type TimerHandle } from './clock';
import { isCompactedError } from './errors';
import type { Compactable, Compactor, RevGetter } from './types';

const NS_PER_MS = 1_000_000n;
const HOUR_NS = 3_600_000_000_000n;
const RETRY_DIVISOR = 10n;

export interface PeriodicSchedule {
  /** Time between compactions once the first retention window has passed. */
  compactIntervalMs: number;
  /** Time between revision samples, and the retry delay after a failed compaction. */
  retryIntervalMs: number;
  /** Samples kept; the oldest is the revision of one retention ago. */
  retentions: number;
}

/**
 * etcd computes these on nanosecond integers; doing the same keeps odd retentions (e.g. 15ns)
 * and long ones (beyond 2^53 ns) on etcd's exact schedule.
 */
export function periodicSchedule(retentionMs: number): PeriodicSchedule {
  assert(Number.isFinite(retentionMs) && retentionMs > 0, 'periodic retention must be positive');
  const periodNs = BigInt(Math.round(retentionMs * 1e6));
  assert(periodNs > 0n, 'periodic retention below one nanosecond');
  const cappedNs = periodNs > HOUR_NS ? HOUR_NS : periodNs;
  let retryNs = cappedNs / RETRY_DIVISOR;
  // Go would divide by zero (and panic) for retentions under 10ns; keep a 1ns floor instead.
  if (retryNs === 0n) retryNs = 1n;
  const retentions = Number(periodNs / retryNs) + 1;
  return {
    compactIntervalMs: nsToMs(cappedNs),
    retryIntervalMs: nsToMs(retryNs),
    retentions,
  };
}

function nsToMs(ns: bigint): number {
  return Number(ns / NS_PER_MS) + Number(ns % NS_PER_MS) / 1e6;
}

export class PeriodicCompactor implements Compactor {
  private readonly schedule: PeriodicSchedule;
  private readonly clock: CompactorClock;
  /** Sampled revisions, oldest first; bounded by schedule.retentions. */
  private readonly revs: number[] = [];
  private timer: TimerHandle | null = null;
  private started = false;
  private stopped = false;
  private paused = false;
  private lastSuccessMs = 0;
  /** A full retention before the first compaction, then the compact interval. */
  private baseIntervalMs: number;

  constructor(
    private readonly retentionMs: number,
    private readonly target: Compactable,
    private readonly revGetter: RevGetter,
    private readonly log: Logger,
    clock: CompactorClock = realClock,
  ) {
    this.schedule = periodicSchedule(retentionMs);
    this.clock = clock;
    this.baseIntervalMs = retentionMs;
  }

  run(): void {
    assert(!this.started, 'compactor started twice');
    this.started = true;
    if (this.stopped) return;
    this.lastSuccessMs = this.clock.nowMs();
    this.sampleAndWait();
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

  private sampleAndWait(): void {
    const rev = this.revGetter.currentRevision();
    assert(Number.isSafeInteger(rev) && rev >= 0, `bad current revision ${rev}`);
    this.revs.push(rev);
    if (this.revs.length > this.schedule.retentions) this.revs.shift();
    assert(this.revs.length <= this.schedule.retentions);
    assert(this.timer === null);
    this.timer = this.clock.setTimeout(() => this.onTick(), this.schedule.retryIntervalMs);
  }

  private onTick(): void {
    this.timer = null;
    if (this.stopped) return;
    if (this.paused || this.clock.nowMs() - this.lastSuccessMs < this.baseIntervalMs) {
      this.sampleAndWait();
      return;
    }
    if (this.baseIntervalMs === this.retentionMs) this.baseIntervalMs = this.schedule.compactIntervalMs;
    const rev = this.revs[0];
    assert(rev !== undefined, 'a sample is taken before every tick');
    void this.compactTo(rev).then(() => {
      if (!this.stopped) this.sampleAndWait();
    });
  }

  private async compactTo(rev: number): Promise<void> {
    const period = formatGoDurationMs(this.retentionMs);
    this.log.info('starting auto periodic compaction', { revision: rev, 'compact-period': period });
    const startMs = this.clock.nowMs();
    let err: unknown = null;
    try {
      await this.target.compact({ revision: String(rev), physical: false });
    } catch (e) {
      err = e;
    }
    if (err === null || isCompactedError(err)) {
      this.log.info('completed auto periodic compaction', {
        revision: rev,
        'compact-period': period,
        took: formatGoDurationMs(this.clock.nowMs() - startMs),
      });
      this.lastSuccessMs = this.clock.nowMs();
    } else {
      this.log.warn('failed auto periodic compaction', {
        revision: rev,
        'compact-period': period,
        'retry-interval': formatGoDurationMs(this.schedule.retryIntervalMs),
        error: toError(err),
      });
    }
  }
}

export function toError(e: unknown): Error {
  return e instanceof Error ? e : new Error(String(e));
}
