// A small in-memory EtcdServerApi: just enough KV, lease and watch semantics (revisions,
// txn compares, prefix ranges sorted by create revision, lease-attached keys, watch replay
// from a start revision) to exercise the Lock and Election services without the real stack.
import { etcdError } from '../../../src/errors';
import type { KeyValue, MvccEvent } from '../../../src/mvcc/types';
import type * as pb from '../../../src/pb/types';
import type { EtcdServerApi } from '../../../src/server/types';
import type { WatchCreateParams, WatchSink, WatchStream, WatchStreamEvent } from '../../../src/watch/types';

interface Watcher {
  id: number;
  params: WatchCreateParams;
  sink: WatchSink;
}

const hex = (b: Buffer): string => b.toString('hex');

function inRange(key: Buffer, from: Buffer, end: Buffer): boolean {
  if (end.length === 0) return key.equals(from);
  if (end.length === 1 && end[0] === 0) return Buffer.compare(key, from) >= 0;
  return Buffer.compare(key, from) >= 0 && Buffer.compare(key, end) < 0;
}

function toPb(kv: KeyValue): pb.KeyValue {
  return {
    key: kv.key,
    createRevision: String(kv.createRevision),
    modRevision: String(kv.modRevision),
    version: String(kv.version),
    value: kv.value,
    lease: kv.lease.toString(),
  };
}

export class FakeEtcd {
  rev = 1;
  readonly kvs = new Map<string, KeyValue>();
  readonly leases = new Map<bigint, Set<string>>();
  private readonly history: { rev: number; events: MvccEvent[] }[] = [];
  private readonly watchers = new Set<Watcher>();
  private nextLeaseId = 7587869934263396352n;
  private nextWatchId = 1;
  /** Open watch streams, so tests can check that waiters clean up. */
  openStreams = 0;

  header(revision?: number): pb.ResponseHeader {
    return { clusterId: '17', memberId: '18', revision: String(revision ?? this.rev), raftTerm: '2' };
  }

  keysUnder(prefix: string): string[] {
    return [...this.kvs.values()].map((kv) => kv.key.toString()).filter((k) => k.startsWith(prefix)).sort();
  }

  async range(req: pb.RangeRequest): Promise<pb.RangeResponse> {
    return this.rangeNow(req);
  }

  private rangeNow(req: pb.RangeRequest): pb.RangeResponse {
    let kvs = [...this.kvs.values()].filter((kv) => inRange(kv.key, req.key, req.rangeEnd));
    const count = kvs.length;
    const maxCreate = Number(req.maxCreateRevision);
    if (maxCreate > 0) kvs = kvs.filter((kv) => kv.createRevision <= maxCreate);
    kvs.sort((a, b) => Buffer.compare(a.key, b.key));
    if (req.sortTarget === 2 /* CREATE */) kvs.sort((a, b) => a.createRevision - b.createRevision);
    if (req.sortOrder === 2 /* DESCEND */) kvs.reverse();
    const limit = Number(req.limit);
    const more = limit > 0 && kvs.length > limit;
    if (limit > 0) kvs = kvs.slice(0, limit);
    return { header: this.header(), kvs: kvs.map(toPb), more, count: String(count) };
  }

  async put(req: pb.PutRequest): Promise<pb.PutResponse> {
    const w = this.begin();
    const resp = this.putIn(w, req);
    this.commit(w);
    return { ...resp, header: this.header() };
  }

  async deleteRange(req: pb.DeleteRangeRequest): Promise<pb.DeleteRangeResponse> {
    const w = this.begin();
    const resp = this.deleteIn(w, req);
    this.commit(w);
    return { ...resp, header: this.header() };
  }

  async txn(req: pb.TxnRequest): Promise<pb.TxnResponse> {
    const succeeded = req.compare.every((c) => this.compare(c));
    const ops = succeeded ? req.success : req.failure;
    // Validate leases first so a failing txn writes nothing.
    for (const op of ops) {
      const lease = op.requestPut ? BigInt(op.requestPut.lease) : 0n;
      if (lease !== 0n && !this.leases.has(lease)) throw etcdError('LeaseNotFound');
    }
    const w = this.begin();
    const responses: pb.ResponseOp[] = ops.map((op) => {
      if (op.requestRange) return { response: 'responseRange', responseRange: this.rangeNow(op.requestRange) } as pb.ResponseOp;
      if (op.requestPut) return { response: 'responsePut', responsePut: this.putIn(w, op.requestPut) } as pb.ResponseOp;
      if (op.requestDeleteRange) return { response: 'responseDeleteRange', responseDeleteRange: this.deleteIn(w, op.requestDeleteRange) } as pb.ResponseOp;
      throw new Error('nested txn not supported by the fake');
    });
    this.commit(w);
    return { header: this.header(), succeeded, responses };
  }

  async leaseGrant(req: pb.LeaseGrantRequest): Promise<pb.LeaseGrantResponse> {
    const id = req.ID !== '0' ? BigInt(req.ID) : this.nextLeaseId++;
    this.leases.set(id, new Set());
    return { header: this.header(), ID: id.toString(), TTL: req.TTL, error: '' };
  }

  async leaseRevoke(req: pb.LeaseRevokeRequest): Promise<pb.LeaseRevokeResponse> {
    const keys = this.leases.get(BigInt(req.ID));
    if (keys === undefined) throw etcdError('LeaseNotFound');
    const w = this.begin();
    for (const k of keys) this.deleteIn(w, { key: Buffer.from(k, 'hex'), rangeEnd: Buffer.alloc(0), prevKv: false });
    this.leases.delete(BigInt(req.ID));
    this.commit(w);
    return { header: this.header() };
  }

  async leaseLeases(): Promise<pb.LeaseLeasesResponse> {
    return { header: this.header(), leases: [...this.leases.keys()].map((id) => ({ ID: id.toString() })) };
  }

  openWatchStream(sink: WatchSink): WatchStream {
    const mine = new Set<Watcher>();
    let closed = false;
    this.openStreams++;
    const deliver = (ev: WatchStreamEvent): void => {
      queueMicrotask(() => {
        if (!closed) sink(ev);
      });
    };
    const base = { headerRevision: this.rev, created: false, canceled: false, compactRevision: 0, cancelReason: '', fragment: false, events: [] };
    return {
      create: (params) => {
        const w: Watcher = { id: this.nextWatchId++, params, sink: (ev) => (deliver(ev), true) };
        deliver({ ...base, watchId: w.id, headerRevision: this.rev, created: true });
        if (params.startRevision > 0) {
          for (const h of this.history) {
            if (h.rev < params.startRevision) continue;
            const events = h.events.filter((e) => inRange(e.kv.key, params.key, params.rangeEnd));
            if (events.length > 0) deliver({ ...base, watchId: w.id, headerRevision: h.rev, events });
          }
        }
        mine.add(w);
        this.watchers.add(w);
      },
      cancel: (id) => {
        for (const w of mine) if (w.id === id) return this.watchers.delete(w) && mine.delete(w);
        return false;
      },
      requestProgress: () => undefined,
      resume: () => undefined,
      close: () => {
        if (closed) return;
        closed = true;
        this.openStreams--;
        for (const w of mine) this.watchers.delete(w);
      },
    };
  }

  private compare(c: pb.Compare): boolean {
    const kv = this.kvs.get(hex(c.key));
    let cmp: number;
    switch (c.target) {
      case 1: // CREATE
        cmp = (kv?.createRevision ?? 0) - Number(c.createRevision);
        break;
      case 2: // MOD
        cmp = (kv?.modRevision ?? 0) - Number(c.modRevision);
        break;
      case 0: // VERSION
        cmp = (kv?.version ?? 0) - Number(c.version);
        break;
      case 3: // VALUE
        if (kv === undefined) return false;
        cmp = Buffer.compare(kv.value, c.value ?? Buffer.alloc(0));
        break;
      default:
        throw new Error(`compare target ${c.target} not supported by the fake`);
    }
    return [cmp === 0, cmp > 0, cmp < 0, cmp !== 0][c.result];
  }

  private begin(): { rev: number; events: MvccEvent[] } {
    return { rev: this.rev + 1, events: [] };
  }

  private commit(w: { rev: number; events: MvccEvent[] }): void {
    if (w.events.length === 0) return;
    this.rev = w.rev;
    this.history.push(w);
    for (const watcher of this.watchers) {
      if (watcher.params.startRevision > w.rev) continue;
      const events = w.events.filter((e) => inRange(e.kv.key, watcher.params.key, watcher.params.rangeEnd));
      if (events.length === 0) continue;
      watcher.sink({
        watchId: watcher.id, headerRevision: w.rev, created: false, canceled: false,
        compactRevision: 0, cancelReason: '', fragment: false, events,
      });
    }
  }

  private putIn(w: { rev: number; events: MvccEvent[] }, req: pb.PutRequest): Omit<pb.PutResponse, 'header'> {
    const lease = BigInt(req.lease);
    if (lease !== 0n && !this.leases.has(lease)) throw etcdError('LeaseNotFound');
    const k = hex(req.key);
    const prev = this.kvs.get(k);
    if (prev !== undefined && prev.lease !== 0n) this.leases.get(prev.lease)?.delete(k);
    const kv: KeyValue = {
      key: req.key,
      value: req.value,
      lease,
      createRevision: prev?.createRevision ?? w.rev,
      modRevision: w.rev,
      version: (prev?.version ?? 0) + 1,
    };
    this.kvs.set(k, kv);
    if (lease !== 0n) this.leases.get(lease)?.add(k);
    w.events.push({ type: 0, kv, prevKv: prev ?? null });
    return { prevKv: null };
  }

  private deleteIn(w: { rev: number; events: MvccEvent[] }, req: pb.DeleteRangeRequest): Omit<pb.DeleteRangeResponse, 'header'> {
    const doomed = [...this.kvs.entries()].filter(([, kv]) => inRange(kv.key, req.key, req.rangeEnd));
    for (const [k, kv] of doomed) {
      this.kvs.delete(k);
      if (kv.lease !== 0n) this.leases.get(kv.lease)?.delete(k);
      w.events.push({
        type: 1,
        kv: { key: kv.key, value: Buffer.alloc(0), lease: 0n, createRevision: 0, modRevision: w.rev, version: 0 },
        prevKv: kv,
      });
    }
    return { deleted: String(doomed.length), prevKvs: [] };
  }
}

/** The fake as an EtcdServerApi; methods the services never call throw. */
export function fakeApi(fake: FakeEtcd): EtcdServerApi {
  const unused = (name: string) => (): never => {
    throw new Error(`${name} not used by lock/election`);
  };
  return {
    range: (r) => fake.range(r),
    put: (r) => fake.put(r),
    deleteRange: (r) => fake.deleteRange(r),
    txn: (r) => fake.txn(r),
    compact: unused('compact'),
    openWatchStream: (sink) => fake.openWatchStream(sink),
    leaseGrant: (r) => fake.leaseGrant(r),
    leaseRevoke: (r) => fake.leaseRevoke(r),
    leaseKeepAlive: unused('leaseKeepAlive'),
    leaseTimeToLive: unused('leaseTimeToLive'),
    leaseLeases: () => fake.leaseLeases(),
    memberList: unused('memberList'),
    memberAdd: unused('memberAdd'),
    memberRemove: unused('memberRemove'),
    memberUpdate: unused('memberUpdate'),
    memberPromote: unused('memberPromote'),
    status: unused('status'),
    memberState: unused('memberState'),
    alarm: unused('alarm'),
    defragment: unused('defragment'),
    hash: unused('hash'),
    hashKV: unused('hashKV'),
    snapshot: unused('snapshot'),
    moveLeader: unused('moveLeader'),
    authStatus: unused('authStatus'),
    health: unused('health'),
    versions: unused('versions'),
    header: (rev) => fake.header(rev),
    limits: { maxRequestBytes: 1.5 * 1024 * 1024, maxTxnOps: 128 },
  };
}
