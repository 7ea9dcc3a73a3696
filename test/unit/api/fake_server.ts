// An in-memory EtcdServerApi good enough to drive the API adapters from real clients.
import type * as pb from '../../../src/pb/types';
import { etcdError } from '../../../src/errors';
import type { KeyValue, MvccEvent } from '../../../src/mvcc/types';
import type { EtcdServerApi } from '../../../src/server/types';
import type { WatchCreateParams, WatchSink, WatchStream, WatchStreamEvent } from '../../../src/watch/types';

export const CLUSTER_ID = '14841639068965178418';
export const MEMBER_ID = '10276657743932975437';
export const RAFT_TERM = '7';

function inRange(key: Buffer, start: Buffer, end: Buffer): boolean {
  if (end.length === 0) return key.equals(start);
  if (end.length === 1 && end[0] === 0) return Buffer.compare(key, start) >= 0;
  return Buffer.compare(key, start) >= 0 && Buffer.compare(key, end) < 0;
}

function toPbKv(kv: KeyValue): pb.KeyValue {
  return {
    key: kv.key,
    createRevision: String(kv.createRevision),
    modRevision: String(kv.modRevision),
    version: String(kv.version),
    value: kv.value,
    lease: kv.lease.toString(),
  };
}

interface FakeWatcher {
  id: number;
  params: WatchCreateParams;
}

export class FakeWatchStream implements WatchStream {
  readonly watchers = new Map<number, FakeWatcher>();
  private nextId = 1;
  closed = false;
  resumed = 0;
  lastCreate: WatchCreateParams | undefined;

  constructor(
    private readonly srv: FakeServer,
    readonly sink: WatchSink,
  ) {}

  create(params: WatchCreateParams): void {
    this.lastCreate = params;
    let id = params.watchId;
    if (id === 0) {
      while (this.watchers.has(this.nextId)) this.nextId++;
      id = this.nextId++;
    } else if (this.watchers.has(id)) {
      throw new Error('mvcc: duplicate watch ID provided on the WatchStream');
    }
    this.watchers.set(id, { id, params });
    this.emit({ watchId: id, created: true, events: [] });
  }
  cancel(watchId: number): boolean {
    if (!this.watchers.delete(watchId)) return false;
    this.emit({ watchId, canceled: true, events: [] });
    return true;
  }
  requestProgress(): void {
    this.emit({ watchId: -1, events: [] });
  }
  resume(): void {
    this.resumed++;
  }
  close(): void {
    this.closed = true;
    this.watchers.clear();
    this.srv.streams.delete(this);
  }

  emit(partial: Partial<WatchStreamEvent> & { watchId: number; events: MvccEvent[] }): boolean {
    return this.sink({
      headerRevision: this.srv.rev,
      created: false,
      canceled: false,
      compactRevision: 0,
      cancelReason: '',
      fragment: false,
      ...partial,
    });
  }

  deliver(ev: MvccEvent): void {
    for (const w of this.watchers.values()) {
      if (!inRange(ev.kv.key, w.params.key, w.params.rangeEnd)) continue;
      if (w.params.filters.includes(ev.type)) continue;
      this.emit({ watchId: w.id, events: [w.params.prevKv ? ev : { ...ev, prevKv: null }] });
    }
  }
}

export class FakeServer implements EtcdServerApi {
  rev = 1;
  readonly kvs = new Map<string, KeyValue>();
  readonly streams = new Set<FakeWatchStream>();
  readonly leases = new Map<string, number>();
  private nextLease = 7587880000000000000n;
  healthy = true;
  alarms: pb.AlarmMember[] = [];
  isLearner = false;
  leader = MEMBER_ID;
  keepAliveDelayMs = 0;
  snapshotChunks: Buffer[] = [Buffer.from('snap-part-1'), Buffer.from('snap-part-2')];
  readonly calls: string[] = [];

  limits = { maxRequestBytes: 1.5 * 1024 * 1024, maxTxnOps: 128 };

  header(revision?: number): pb.ResponseHeader {
    return { clusterId: CLUSTER_ID, memberId: MEMBER_ID, revision: String(revision ?? this.rev), raftTerm: RAFT_TERM };
  }

  private select(key: Buffer, rangeEnd: Buffer): KeyValue[] {
    return [...this.kvs.values()]
      .filter((kv) => inRange(kv.key, key, rangeEnd))
      .sort((a, b) => Buffer.compare(a.key, b.key));
  }

  async range(req: pb.RangeRequest): Promise<pb.RangeResponse> {
    this.calls.push('range');
    let kvs = this.select(req.key, req.rangeEnd);
    const count = kvs.length;
    const limit = Number(req.limit);
    const more = limit > 0 && kvs.length > limit;
    if (limit > 0) kvs = kvs.slice(0, limit);
    return {
      header: this.header(),
      kvs: req.countOnly ? [] : kvs.map((kv) => (req.keysOnly ? { ...toPbKv(kv), value: Buffer.alloc(0) } : toPbKv(kv))),
      more,
      count: String(count),
    };
  }

  private doPut(key: Buffer, value: Buffer, lease: bigint): KeyValue | null {
    this.rev++;
    const k = key.toString('latin1');
    const prev = this.kvs.get(k) ?? null;
    const kv: KeyValue = {
      key: Buffer.from(key),
      value: Buffer.from(value),
      createRevision: prev ? prev.createRevision : this.rev,
      modRevision: this.rev,
      version: prev ? prev.version + 1 : 1,
      lease,
    };
    this.kvs.set(k, kv);
    for (const s of this.streams) s.deliver({ type: 0, kv, prevKv: prev });
    return prev;
  }

  async put(req: pb.PutRequest): Promise<pb.PutResponse> {
    this.calls.push('put');
    const prev = this.doPut(req.key, req.value, BigInt(req.lease || '0'));
    return { header: this.header(), prevKv: req.prevKv && prev ? toPbKv(prev) : null };
  }

  async deleteRange(req: pb.DeleteRangeRequest): Promise<pb.DeleteRangeResponse> {
    this.calls.push('deleteRange');
    const victims = this.select(req.key, req.rangeEnd);
    if (victims.length > 0) this.rev++;
    for (const v of victims) {
      this.kvs.delete(v.key.toString('latin1'));
      const tomb: KeyValue = { key: v.key, value: Buffer.alloc(0), createRevision: 0, modRevision: this.rev, version: 0, lease: 0n };
      for (const s of this.streams) s.deliver({ type: 1, kv: tomb, prevKv: v });
    }
    return { header: this.header(), deleted: String(victims.length), prevKvs: req.prevKv ? victims.map(toPbKv) : [] };
  }

  async txn(req: pb.TxnRequest): Promise<pb.TxnResponse> {
    this.calls.push('txn');
    // Only "compare value ==" and "version ==" are evaluated; enough for the client tests.
    let ok = true;
    for (const c of req.compare) {
      const kv = this.kvs.get(c.key.toString('latin1'));
      if (c.targetUnion === 'value') ok &&= !!kv && kv.value.equals(c.value!);
      if (c.targetUnion === 'version') ok &&= (kv ? kv.version : 0) === Number(c.version);
    }
    const responses: pb.ResponseOp[] = [];
    for (const op of ok ? req.success : req.failure) {
      if (op.requestPut) responses.push({ responsePut: await this.put(op.requestPut), response: 'responsePut' });
      else if (op.requestRange) responses.push({ responseRange: await this.range(op.requestRange), response: 'responseRange' });
      else if (op.requestDeleteRange)
        responses.push({ responseDeleteRange: await this.deleteRange(op.requestDeleteRange), response: 'responseDeleteRange' });
    }
    return { header: this.header(), succeeded: ok, responses };
  }

  async compact(_req: pb.CompactionRequest): Promise<pb.CompactionResponse> {
    return { header: this.header() };
  }

  openWatchStream(sink: WatchSink): WatchStream {
    const s = new FakeWatchStream(this, sink);
    this.streams.add(s);
    return s;
  }

  async leaseGrant(req: pb.LeaseGrantRequest): Promise<pb.LeaseGrantResponse> {
    const id = req.ID !== '0' && req.ID !== '' ? req.ID : String(this.nextLease++);
    this.leases.set(id, Number(req.TTL));
    return { header: this.header(), ID: id, TTL: req.TTL, error: '' };
  }
  async leaseRevoke(req: pb.LeaseRevokeRequest): Promise<pb.LeaseRevokeResponse> {
    if (!this.leases.delete(req.ID)) throw etcdError('LeaseNotFound');
    return { header: this.header() };
  }
  async leaseKeepAlive(req: pb.LeaseKeepAliveRequest): Promise<pb.LeaseKeepAliveResponse> {
    if (this.keepAliveDelayMs > 0) await new Promise((r) => setTimeout(r, this.keepAliveDelayMs * Math.random()));
    if (req.ID === '666') throw etcdError('NoLeader');
    const ttl = this.leases.get(req.ID);
    if (ttl === undefined) throw etcdError('LeaseNotFound');
    return { header: this.header(), ID: req.ID, TTL: String(ttl) };
  }
  async leaseTimeToLive(req: pb.LeaseTimeToLiveRequest): Promise<pb.LeaseTimeToLiveResponse> {
    const ttl = this.leases.get(req.ID);
    if (ttl === undefined) throw etcdError('LeaseNotFound');
    return { header: this.header(), ID: req.ID, TTL: String(ttl), grantedTTL: String(ttl), keys: [] };
  }
  async leaseLeases(_req: pb.LeaseLeasesRequest): Promise<pb.LeaseLeasesResponse> {
    return { header: this.header(), leases: [...this.leases.keys()].map((ID) => ({ ID })) };
  }

  private member(): pb.Member {
    return { ID: MEMBER_ID, name: 'default', peerURLs: ['http://localhost:2380'], clientURLs: ['http://localhost:2379'], isLearner: false };
  }
  async memberList(_req: pb.MemberListRequest): Promise<pb.MemberListResponse> {
    return { header: this.header(), members: [this.member()] };
  }
  async memberAdd(req: pb.MemberAddRequest): Promise<pb.MemberAddResponse> {
    const m: pb.Member = { ID: '42', name: '', peerURLs: req.peerURLs, clientURLs: [], isLearner: req.isLearner };
    return { header: this.header(), member: m, members: [this.member(), m] };
  }
  async memberRemove(_req: pb.MemberRemoveRequest): Promise<pb.MemberRemoveResponse> {
    throw etcdError('MemberNotFound');
  }
  async memberUpdate(_req: pb.MemberUpdateRequest): Promise<pb.MemberUpdateResponse> {
    return { header: this.header(), members: [this.member()] };
  }
  async memberPromote(_req: pb.MemberPromoteRequest): Promise<pb.MemberPromoteResponse> {
    throw etcdError('MemberNotLearner');
  }

  memberState(): { hasLeader: boolean; isLearner: boolean } {
    return { hasLeader: this.leader !== '0' && this.leader !== '', isLearner: this.isLearner };
  }

  async status(_req: pb.StatusRequest): Promise<pb.StatusResponse> {
    return {
      header: this.header(),
      version: '3.6.0',
      dbSize: '4096',
      leader: this.leader,
      raftIndex: '10',
      raftTerm: RAFT_TERM,
      raftAppliedIndex: '10',
      errors: [],
      dbSizeInUse: '4096',
      isLearner: this.isLearner,
      storageVersion: '3.6.0',
      dbSizeQuota: '2147483648',
      downgradeInfo: null,
    };
  }
  async alarm(_req: pb.AlarmRequest): Promise<pb.AlarmResponse> {
    return { header: this.header(), alarms: this.alarms };
  }
  async defragment(_req: pb.DefragmentRequest): Promise<pb.DefragmentResponse> {
    return { header: this.header() };
  }
  async hash(_req: pb.HashRequest): Promise<pb.HashResponse> {
    return { header: this.header(), hash: 1234 };
  }
  async hashKV(_req: pb.HashKVRequest): Promise<pb.HashKVResponse> {
    return { header: this.header(), hash: 5678, compactRevision: '0', hashRevision: String(this.rev) };
  }
  async *snapshot(): AsyncIterable<pb.SnapshotResponse> {
    let remaining = this.snapshotChunks.reduce((a, b) => a + b.length, 0);
    for (const c of this.snapshotChunks) {
      remaining -= c.length;
      yield { header: this.header(), remainingBytes: String(remaining), blob: c, version: '3.6.0' };
    }
  }
  async moveLeader(_req: pb.MoveLeaderRequest): Promise<pb.MoveLeaderResponse> {
    return { header: this.header() };
  }
  async authStatus(_req: pb.AuthStatusRequest): Promise<pb.AuthStatusResponse> {
    return { header: this.header(), enabled: false, authRevision: '0' } as pb.AuthStatusResponse;
  }
  async health(opts: { serializable: boolean; exclude: string[] }): Promise<{ ok: boolean; reason: string }> {
    this.calls.push(`health:${opts.serializable}:${opts.exclude.join(',')}`);
    if (!this.healthy) return { ok: false, reason: 'RAFT NO LEADER' };
    return { ok: true, reason: '' };
  }
  versions(): { etcdserver: string; etcdcluster: string } {
    return { etcdserver: '3.6.0', etcdcluster: '3.6.0' };
  }
}
