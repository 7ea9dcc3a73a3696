import { describe, expect, it } from 'vitest';
import { etcdError } from '../../../src/errors';
import { createCompactor, periodicSchedule, REVISION_CHECK_INTERVAL_MS } from '../../../src/compactor';
import { captureLog, CountingRevs, FakeClock, FixedRevs, RecordingTarget } from './fake';

const MINUTE_MS = 60_000;
const HOUR_MS = 60 * MINUTE_MS;

function periodic(retentionMs: number) {
  const clock = new FakeClock();
  const revs = new CountingRevs();
  const target = new RecordingTarget();
  const cap = captureLog();
  const c = createCompactor('periodic', { retentionMs, retentionRevisions: 0, target, revs, log: cap.log, clock });
  if (c === null) throw new Error('expected a compactor');
  return { clock, revs, target, cap, c };
}

describe('periodicSchedule', () => {
  it('samples every tenth of the retention, capped at one hour', () => {
    expect(periodicSchedule(5 * MINUTE_MS)).toEqual({ compactIntervalMs: 5 * MINUTE_MS, retryIntervalMs: 30_000, retentions: 11 });
    expect(periodicSchedule(2 * HOUR_MS)).toEqual({ compactIntervalMs: HOUR_MS, retryIntervalMs: 6 * MINUTE_MS, retentions: 21 });
    expect(periodicSchedule(24 * HOUR_MS).retentions).toBe(241);
    expect(periodicSchedule(59 * MINUTE_MS).retryIntervalMs).toBe(5.9 * MINUTE_MS);
  });
});

describe('createCompactor', () => {
  it('returns null when retention is 0 (auto-compaction off)', () => {
    const cap = captureLog();
    const opts = { retentionMs: 0, retentionRevisions: 0, target: new RecordingTarget(), revs: new FixedRevs(1), log: cap.log };
    expect(createCompactor('periodic', opts)).toBeNull();
    expect(createCompactor('revision', opts)).toBeNull();
  });
});

describe('periodic compactor', () => {
  it('waits one retention, then compacts every hour to the revision of one retention ago (2h retention)', async () => {
    const { clock, target, c } = periodic(2 * HOUR_MS);
    c.run();
    const retry = 6 * MINUTE_MS;
    for (let i = 0; i < 19; i++) await clock.advance(retry);
    expect(target.revisions).toEqual([]);
    await clock.advance(retry); // t = 2h
    expect(target.revisions).toEqual([1]);
    expect(target.physical).toEqual([false]);
    for (let hour = 1; hour <= 3; hour++) {
      for (let j = 0; j < 10; j++) await clock.advance(retry);
      expect(target.revisions.at(-1)).toBe(hour * 10);
    }
    expect(target.revisions).toEqual([1, 10, 20, 30]);
    c.stop();
  });

  it('compacts every retention for retentions under an hour (5m)', async () => {
    const { clock, target, c, cap } = periodic(5 * MINUTE_MS);
    c.run();
    await clock.advance(5 * MINUTE_MS);
    expect(target.revisions).toEqual([1]);
    for (let i = 1; i <= 5; i++) {
      await clock.advance(5 * MINUTE_MS);
      expect(target.revisions.at(-1)).toBe(i * 10);
    }
    c.stop();
    const start = cap.entries().find((e) => e.msg === 'starting auto periodic compaction');
    expect(start).toMatchObject({ level: 'info', revision: 1, 'compact-period': '5m0s' });
    const done = cap.entries().find((e) => e.msg === 'completed auto periodic compaction');
    expect(done).toMatchObject({ level: 'info', revision: 1, 'compact-period': '5m0s', took: '0s' });
  });

  it('keeps sampling while paused and compacts the revision of one retention ago on resume', async () => {
    const { clock, target, c } = periodic(HOUR_MS);
    c.run();
    c.pause();
    for (let i = 0; i < 33; i++) await clock.advance(6 * MINUTE_MS);
    expect(target.revisions).toEqual([]);
    c.resume();
    await clock.advance(6 * MINUTE_MS);
    // 11 samples are kept; the oldest is from 1h before: the sample taken at 2h06m.
    expect(target.revisions).toEqual([24]);
    c.stop();
  });

  it('treats "required revision has been compacted" as success and logs others as failures, retrying', async () => {
    const { clock, target, c, cap } = periodic(10 * MINUTE_MS);
    target.failWith = etcdError('Compacted');
    c.run();
    await clock.advance(10 * MINUTE_MS);
    expect(target.revisions).toEqual([1]);
    expect(cap.entries().some((e) => e.msg === 'completed auto periodic compaction')).toBe(true);
    // Success moved the window: the next attempt is one compact interval later.
    await clock.advance(9 * MINUTE_MS);
    expect(target.revisions).toEqual([1]);

    target.failWith = new Error('etcdserver: request timed out');
    await clock.advance(MINUTE_MS);
    expect(target.revisions).toEqual([1, 10]);
    const failed = cap.entries().find((e) => e.msg === 'failed auto periodic compaction');
    expect(failed).toMatchObject({
      level: 'warn',
      revision: 10,
      'compact-period': '10m0s',
      'retry-interval': '1m0s',
      error: 'etcdserver: request timed out',
    });
    // A failure retries after one sample interval, with the window moved on.
    target.failWith = null;
    await clock.advance(MINUTE_MS);
    expect(target.revisions).toEqual([1, 10, 11]);
    c.stop();
  });

  it('stop cancels the schedule', async () => {
    const { clock, target, c } = periodic(MINUTE_MS);
    c.run();
    c.stop();
    expect(clock.pending()).toBe(0);
    await clock.advance(10 * MINUTE_MS);
    expect(target.revisions).toEqual([]);
  });
});

describe('revision compactor', () => {
  function revision(retention: number, current: number) {
    const clock = new FakeClock();
    const revs = new FixedRevs(current);
    const target = new RecordingTarget();
    const cap = captureLog();
    const c = createCompactor('revision', { retentionMs: 0, retentionRevisions: retention, target, revs, log: cap.log, clock });
    if (c === null) throw new Error('expected a compactor');
    return { clock, revs, target, cap, c };
  }

  it('every 5 minutes compacts to current - retention, once per distinct target', async () => {
    const { clock, revs, target, c, cap } = revision(10, 5);
    c.run();
    await clock.advance(REVISION_CHECK_INTERVAL_MS);
    expect(target.revisions).toEqual([]); // 5 - 10 <= 0
    revs.rev = 30;
    await clock.advance(REVISION_CHECK_INTERVAL_MS - 1);
    expect(target.revisions).toEqual([]);
    await clock.advance(1);
    expect(target.revisions).toEqual([20]);
    await clock.advance(REVISION_CHECK_INTERVAL_MS);
    expect(target.revisions).toEqual([20]); // unchanged target is skipped
    revs.rev = 100;
    await clock.advance(REVISION_CHECK_INTERVAL_MS);
    expect(target.revisions).toEqual([20, 90]);
    c.stop();
    expect(cap.entries().filter((e) => e.msg === 'starting auto revision compaction')[0]).toMatchObject({
      revision: 20,
      'revision-compaction-retention': 10,
    });
    expect(cap.entries().filter((e) => e.msg === 'completed auto revision compaction')).toHaveLength(2);
  });

  it('does nothing while paused and picks up after resume', async () => {
    const { clock, target, c } = revision(10, 100);
    c.run();
    c.pause();
    for (let i = 0; i < 3; i++) await clock.advance(REVISION_CHECK_INTERVAL_MS);
    expect(target.revisions).toEqual([]);
    c.resume();
    await clock.advance(REVISION_CHECK_INTERVAL_MS);
    expect(target.revisions).toEqual([90]);
    c.stop();
  });

  it('retries a failed target and treats ErrCompacted as done', async () => {
    const { clock, target, c, cap } = revision(10, 100);
    target.failWith = new Error('etcdserver: no leader');
    c.run();
    await clock.advance(REVISION_CHECK_INTERVAL_MS);
    expect(cap.entries().find((e) => e.msg === 'failed auto revision compaction')).toMatchObject({
      level: 'warn',
      revision: 90,
      'retry-interval': '5m0s',
      error: 'etcdserver: no leader',
    });
    target.failWith = etcdError('Compacted');
    await clock.advance(REVISION_CHECK_INTERVAL_MS);
    await clock.advance(REVISION_CHECK_INTERVAL_MS);
    expect(target.revisions).toEqual([90, 90]);
    c.stop();
  });
});
