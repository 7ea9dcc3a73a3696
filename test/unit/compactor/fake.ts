// Test doubles for the compactors: a virtual clock, a revision counter and a recording target.
import { createLogger, type Logger } from '../../../src/log';
import type { CompactorClock, TimerHandle } from '../../../src/compactor';

interface FakeTimer {
  id: number;
  atMs: number;
  fn: () => void;
}

/** Virtual time: timers fire only inside advance(), in due order, with promises settled between. */
export class FakeClock implements CompactorClock {
  private now = 0;
  private nextId = 1;
  private timers: FakeTimer[] = [];

  nowMs(): number {
    return this.now;
  }
  setTimeout(fn: () => void, delayMs: number): TimerHandle {
    const t = { id: this.nextId++, atMs: this.now + Math.max(0, delayMs), fn };
    this.timers.push(t);
    return t.id;
  }
  clearTimeout(handle: TimerHandle): void {
    this.timers = this.timers.filter((t) => t.id !== handle);
  }
  pending(): number {
    return this.timers.length;
  }
  async advance(ms: number): Promise<void> {
    const target = this.now + ms;
    for (;;) {
      await settle();
      this.timers.sort((a, b) => a.atMs - b.atMs || a.id - b.id);
      const due = this.timers[0];
      if (due === undefined || due.atMs > target) break;
      this.timers.shift();
      this.now = due.atMs;
      due.fn();
    }
    this.now = target;
    await settle();
  }
}

/** Lets every chained promise callback run (compactions resolve asynchronously). */
export async function settle(): Promise<void> {
  for (let i = 0; i < 5; i++) await new Promise<void>((r) => setImmediate(r));
}

/** Like etcd's fakeRevGetter: each read returns the next revision, starting at 1. */
export class CountingRevs {
  rev = 0;
  calls = 0;
  currentRevision(): number {
    this.calls++;
    return ++this.rev;
  }
}

export class FixedRevs {
  constructor(public rev: number) {}
  currentRevision(): number {
    return this.rev;
  }
}

export class RecordingTarget {
  readonly revisions: number[] = [];
  readonly physical: boolean[] = [];
  failWith: Error | null = null;
  async compact(req: { revision: string; physical: boolean }): Promise<unknown> {
    this.revisions.push(Number(req.revision));
    this.physical.push(req.physical);
    if (this.failWith !== null) throw this.failWith;
    return {};
  }
}

export interface CapturedLog {
  log: Logger;
  entries(): Array<Record<string, unknown>>;
}

export function captureLog(): CapturedLog {
  const lines: string[] = [];
  const sink = { write: (c: string) => lines.push(c), writeSync: (c: string) => lines.push(c) };
  const log = createLogger({ sinks: [sink], sampling: false, level: 'debug' });
  return {
    log,
    entries: () => {
      log.flush();
      return lines
        .join('')
        .split('\n')
        .filter((l) => l.length > 0)
        .map((l) => JSON.parse(l) as Record<string, unknown>);
    },
  };
}
