import assert from 'node:assert';
import { Message } from './types';

interface ReadIndexStatus {
  req: Message;
  index: number;
  acks: Set<bigint>;
}

/**
 * Pending ReadIndex requests of a leader (ReadOnlySafe): each waits for a quorum of heartbeat acks
 * carrying its context, which proves the leader was still leader when the request arrived.
 */
export class ReadOnly {
  private readonly pending = new Map<string, ReadIndexStatus>();
  private queue: string[] = [];

  constructor(readonly maxPending: number) {
    assert(maxPending > 0);
  }

  get size(): number {
    return this.queue.length;
  }

  /** Returns false when the request was not queued (duplicate context or bound reached). */
  addRequest(index: number, m: Message): boolean {
    const ctx = m.entries[0]!.data.toString('latin1');
    if (this.pending.has(ctx)) return false;
    if (this.queue.length >= this.maxPending) return false;
    this.pending.set(ctx, { req: m, index, acks: new Set() });
    this.queue.push(ctx);
    return true;
  }

  /** Records an ack; returns the acks for that context, or null if unknown. */
  recvAck(id: bigint, context: Buffer): ReadonlySet<bigint> | null {
    const rs = this.pending.get(context.toString('latin1'));
    if (!rs) return null;
    rs.acks.add(id);
    return rs.acks;
  }

  /** Dequeues every request up to and including the one with this context (earlier ones are confirmed too). */
  advance(context: Buffer): Array<{ req: Message; index: number }> {
    const ctx = context.toString('latin1');
    const idx = this.queue.indexOf(ctx);
    if (idx < 0) return [];
    const done = this.queue.slice(0, idx + 1);
    this.queue = this.queue.slice(idx + 1);
    const out: Array<{ req: Message; index: number }> = [];
    for (const c of done) {
      const rs = this.pending.get(c);
      assert(rs, 'read index queue and map out of sync');
      this.pending.delete(c);
      out.push({ req: rs.req, index: rs.index });
    }
    return out;
  }

  lastPendingRequestCtx(): Buffer | null {
    if (this.queue.length === 0) return null;
    return Buffer.from(this.queue[this.queue.length - 1]!, 'latin1');
  }
}
