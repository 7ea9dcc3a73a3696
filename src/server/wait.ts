// Registries of callers waiting for something the node loop will produce: the result of a
// proposal (by request ID) or the applied index reaching a value. Both are bounded.
import assert from 'node:assert';

interface Pending<T> {
  resolve(v: T): void;
  reject(e: Error): void;
  timer: NodeJS.Timeout;
}

export class WaitRegistry<K, T> {
  private readonly pending = new Map<K, Pending<T>>();

  constructor(private readonly maxPending: number) {}

  get size(): number {
    return this.pending.size;
  }

  /** Returns null when the registry is full (the caller answers "too many requests"). */
  register(id: K, timeoutMs: number, onTimeout: () => Error): Promise<T> | null {
    if (this.pending.size >= this.maxPending) return null;
    assert(!this.pending.has(id), 'duplicate wait id');
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(onTimeout());
      }, timeoutMs);
      this.pending.set(id, { resolve, reject, timer });
    });
  }

  has(id: K): boolean {
    return this.pending.has(id);
  }

  trigger(id: K, v: T): boolean {
    const p = this.pending.get(id);
    if (!p) return false;
    this.pending.delete(id);
    clearTimeout(p.timer);
    p.resolve(v);
    return true;
  }

  fail(id: K, e: Error): void {
    const p = this.pending.get(id);
    if (!p) return;
    this.pending.delete(id);
    clearTimeout(p.timer);
    p.reject(e);
  }

  failAll(e: Error): void {
    for (const id of [...this.pending.keys()]) this.fail(id, e);
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
