// An in-memory WatchableStore that records every revision's events, for the watch hub tests.
import { etcdError } from '../../../src/errors';
import { EventType, type KeyValue, type MvccEvent } from '../../../src/mvcc/types';
import type { WatchableStore } from '../../../src/watch/types';

export type Op = { put: string | Buffer; value: string } | { del: string | Buffer };

const asKey = (k: string | Buffer): Buffer => (typeof k === 'string' ? Buffer.from(k) : k);

export class FakeStore implements WatchableStore {
  private current = 1; // etcd starts at revision 1 with an empty key space
  private compacted = 0;
  private readonly kvs = new Map<string, KeyValue>();
  readonly history = new Map<number, MvccEvent[]>();
  /** Every revision ever written, never compacted (what a test expects watchers to see). */
  readonly allRevisions = new Map<number, MvccEvent[]>();
  /** Calls to eventsInRange, for asserting bounded batches. */
  readonly reads: Array<{ from: number; to: number; max: number; returned: number }> = [];

  currentRevision(): number {
    return this.current;
  }
  compactRevision(): number {
    return this.compacted;
  }

  /** Apply ops as one revision; returns the events (with prevKv) or null when nothing changed. */
  write(ops: Op[]): { events: MvccEvent[]; rev: number } | null {
    const rev = this.current + 1;
    const events: MvccEvent[] = [];
    for (const op of ops) {
      if ('put' in op) {
        const key = asKey(op.put);
        const id = key.toString('latin1');
        const prev = this.kvs.get(id) ?? null;
        const kv: KeyValue = {
          key,
          createRevision: prev ? prev.createRevision : rev,
          modRevision: rev,
          version: prev ? prev.version + 1 : 1,
          value: Buffer.from(op.value),
          lease: 0n,
        };
        this.kvs.set(id, kv);
        events.push({ type: EventType.PUT, kv, prevKv: prev });
      } else {
        const key = asKey(op.del);
        const id = key.toString('latin1');
        const prev = this.kvs.get(id);
        if (!prev) continue;
        this.kvs.delete(id);
        events.push({
          type: EventType.DELETE,
          kv: { key, createRevision: 0, modRevision: rev, version: 0, value: Buffer.alloc(0), lease: 0n },
          prevKv: prev,
        });
      }
    }
    if (events.length === 0) return null;
    this.current = rev;
    this.history.set(rev, events);
    this.allRevisions.set(rev, events);
    return { events, rev };
  }

  compact(rev: number): void {
    for (const r of [...this.history.keys()]) if (r < rev) this.history.delete(r);
    this.compacted = rev;
  }

  eventsInRange(fromRev: number, toRev: number, maxEvents: number, withPrevKv: boolean): { events: MvccEvent[]; nextRev: number } {
    if (fromRev < this.compacted) throw etcdError('Compacted');
    const events: MvccEvent[] = [];
    let rev = Math.max(fromRev, 1);
    for (; rev <= toRev; rev++) {
      const evs = this.history.get(rev) ?? [];
      if (events.length > 0 && events.length + evs.length > maxEvents) break;
      for (const ev of evs) events.push(withPrevKv ? ev : { ...ev, prevKv: null });
    }
    this.reads.push({ from: fromRev, to: toRev, max: maxEvents, returned: events.length });
    return { events, nextRev: rev };
  }
}
