// The time source of the compactors. Injectable so tests drive the schedule with a fake clock
// instead of waiting out real retention windows.
import { performance } from 'node:perf_hooks';

export type TimerHandle = unknown;

export interface CompactorClock {
  /** Monotonic milliseconds; only differences are used. */
  nowMs(): number;
  setTimeout(fn: () => void, delayMs: number): TimerHandle;
  clearTimeout(handle: TimerHandle): void;
}

export const realClock: CompactorClock = {
  nowMs: () => performance.now(),
  setTimeout: (fn, delayMs) => {
    const t = setTimeout(fn, delayMs);
    // A pending compaction tick must never be what keeps the process alive.
    t.unref();
    return t;
  },
  clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
};
