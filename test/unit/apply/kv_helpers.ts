import type * as pb from '../../../src/pb/types';
import type { LeaseAttacher } from '../../../src/apply/kv';

export class FakeLeases implements LeaseAttacher {
  readonly attached = new Map<bigint, Set<string>>();
  constructor(ids: bigint[] = []) {
    for (const id of ids) this.attached.set(id, new Set());
  }
  exists(id: bigint): boolean {
    return this.attached.has(id);
  }
  attach(id: bigint, key: Buffer): void {
    const s = this.attached.get(id);
    if (!s) throw new Error(`attach to missing lease ${id}`);
    s.add(key.toString());
  }
  detach(id: bigint, key: Buffer): void {
    this.attached.get(id)?.delete(key.toString());
  }
  leaseOf(key: Buffer): bigint {
    for (const [id, keys] of this.attached) if (keys.has(key.toString())) return id;
    return 0n;
  }
  keys(id: bigint): string[] {
    return [...(this.attached.get(id) ?? [])].sort();
  }
}

const B = (s: string | Buffer | undefined): Buffer => (s === undefined ? Buffer.alloc(0) : Buffer.isBuffer(s) ? s : Buffer.from(s));

export function rangeReq(key: string | Buffer, o: Partial<Omit<pb.RangeRequest, 'key' | 'rangeEnd'>> & { rangeEnd?: string | Buffer } = {}): pb.RangeRequest {
  return {
    key: B(key),
    rangeEnd: B(o.rangeEnd),
    limit: o.limit ?? '0',
    revision: o.revision ?? '0',
    sortOrder: o.sortOrder ?? 0,
    sortTarget: o.sortTarget ?? 0,
    serializable: o.serializable ?? false,
    keysOnly: o.keysOnly ?? false,
    countOnly: o.countOnly ?? false,
    minModRevision: o.minModRevision ?? '0',
    maxModRevision: o.maxModRevision ?? '0',
    minCreateRevision: o.minCreateRevision ?? '0',
    maxCreateRevision: o.maxCreateRevision ?? '0',
  };
}

export function putReq(key: string | Buffer, value: string | Buffer, o: Partial<Omit<pb.PutRequest, 'key' | 'value'>> = {}): pb.PutRequest {
  return { key: B(key), value: B(value), lease: o.lease ?? '0', prevKv: o.prevKv ?? false, ignoreValue: o.ignoreValue ?? false, ignoreLease: o.ignoreLease ?? false };
}

export function delReq(key: string | Buffer, rangeEnd?: string | Buffer, prevKv = false): pb.DeleteRangeRequest {
  return { key: B(key), rangeEnd: B(rangeEnd), prevKv };
}

export const op = {
  range: (r: pb.RangeRequest): pb.RequestOp => ({ requestRange: r, request: 'requestRange' }),
  put: (r: pb.PutRequest): pb.RequestOp => ({ requestPut: r, request: 'requestPut' }),
  del: (r: pb.DeleteRangeRequest): pb.RequestOp => ({ requestDeleteRange: r, request: 'requestDeleteRange' }),
  txn: (r: pb.TxnRequest): pb.RequestOp => ({ requestTxn: r, request: 'requestTxn' }),
};

type Target = 'version' | 'createRevision' | 'modRevision' | 'value' | 'lease';
const TARGET_NUM: Record<Target, number> = { version: 0, createRevision: 1, modRevision: 2, value: 3, lease: 4 };
const RESULT_NUM = { '=': 0, '>': 1, '<': 2, '!=': 3 } as const;

export function cmp(key: string, target: Target, result: keyof typeof RESULT_NUM, v: string | Buffer, rangeEnd?: string | Buffer): pb.Compare {
  const c: pb.Compare = { result: RESULT_NUM[result], target: TARGET_NUM[target], key: B(key), rangeEnd: B(rangeEnd), targetUnion: target };
  if (target === 'value') c.value = B(v);
  else c[target] = String(v);
  return c;
}

export function txnReq(compare: pb.Compare[], success: pb.RequestOp[], failure: pb.RequestOp[] = []): pb.TxnRequest {
  return { compare, success, failure };
}
