// Registries of callers waiting for something the node loop will produce: the result of a
// proposal (by request ID) or the applied index reaching a value. Both are bounded.
import assert from 'node:assert';
import { SlotMap, type SlotKey } from '../runtime/slot_map';

const NOOP = (): void => {};

interface Pending<K, T> {
  id: K;
  resolve(v: T): void;
  reject(e: Error): void;
  /** performance.now() at which the wait fails with onTimeout(). */
  deadlineMs: number;
  /** Builds the wait's error; given the performance.now() at which the wait was registered. */
  onTimeout: (registeredAtMs: number) => Error;
}

/**
 * Waits keyed by ID, each failing after the registry's one timeout. One timer serves them all; it
 * fires when the oldest wait is due, fails whatever is due and re-arms for the next deadline.
 * (A setTimeout per proposal cost a Timeout object and two timer-list updates per write.) The
 * waits live in a SlotMap, not a Map: one insert and one delete per write made the Map's tables
 * keep finished requests alive through young collections (see src/runtime/slot_map.ts).
 */
export class WaitRegistry<K extends SlotKey, T> {
  private readonly pending: SlotMap<K, Pending<K, T>>;
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly maxPending: number,
    private readonly timeoutMs: number,
  ) {
    assert(maxPending > 0 && timeoutMs > 0, 'WaitRegistry needs a bound and a timeout');
    this.pending = new SlotMap<K, Pending<K, T>>(maxPending);
  }

  get size(): number {
    return this.pending.size;
  }

  /** Returns null when the registry is full (the caller answers "too many requests"). */
  register(id: K, onTimeout: (registeredAtMs: number) => Error): Promise<T> | null {
    if (this.pending.size >= this.maxPending) return null;
    const p: Pending<K, T> = { id, resolve: NOOP, reject: NOOP, deadlineMs: performance.now() + this.timeoutMs, onTimeout };
    // Entered before the promise exists, so a duplicate throws here rather than rejecting it.
    if (!this.pending.add(id, p)) assert.fail('duplicate wait id');
    if (this.timer === null) this.arm(this.timeoutMs);
    return new Promise<T>((resolve, reject) => {
      p.resolve = resolve;
      p.reject = reject;
    });
  }

  has(id: K): boolean {
    return this.pending.has(id);
  }

  trigger(id: K, v: T): boolean {
    const p = this.pending.get(id);
    if (!p) return false;
    this.remove(id);
    p.resolve(v);
    return true;
  }

  fail(id: K, e: Error): void {
    const p = this.pending.get(id);
    if (!p) return;
    this.remove(id);
    p.reject(e);
  }

  failAll(e: Error): void {
    for (const id of this.pending.keyList()) this.fail(id, e);
    if (this.timer !== null) {
      clearTimeout(this.timer);
      this.timer = null;
    }
  }

  private remove(id: K): void {
    // The timer stays armed when the registry empties; it lapses with nothing to do. With one
    // request at a time, clearing it and arming a new one cost a Timeout object and two
    // timer-list updates per proposal.
    this.pending.delete(id);
  }

  private arm(delayMs: number): void {
    // Unreferenced: an armed timer with nothing pending must not hold the process open.
    this.timer = setTimeout(() => this.expire(), Math.max(1, Math.ceil(delayMs))).unref();
  }

  private expire(): void {
    this.timer = null;
    // Timers run on the loop's cached clock and may fire a little early: what is not due yet
    // waits for another turn of the timer.
    const now = performance.now();
    let nextDeadlineMs = Infinity;
    for (const p of this.pending.values()) {
      if (p.deadlineMs <= now) {
        this.pending.delete(p.id);
        p.reject(p.onTimeout(p.deadlineMs - this.timeoutMs));
      } else if (p.deadlineMs < nextDeadlineMs) {
        nextDeadlineMs = p.deadlineMs;
      }
    }
    if (nextDeadlineMs !== Infinity) this.arm(nextDeadlineMs - now);
  }
}

/** Callers waiting until the applied index reaches a value. */
export class AppliedWaiter {
  private waiters: Array<{ index: number; resolve(): void }> = [];

  constructor(private readonly maxWaiters: number) {}

  wait(index: number, applied: number): Promise<void> | null {
    if (index <= applied) return Promise.resolve();
    if (this.waiters.length >= this.maxWaiters) return null;
    return new Promise((resolve) => this.waiters.push({ index, resolve }));
  }

  appliedTo(applied: number): void {
    if (this.waiters.length === 0) return;
    const keep: typeof this.waiters = [];
    for (const w of this.waiters) (w.index <= applied ? w.resolve() : keep.push(w));
    this.waiters = keep;
  }
}
