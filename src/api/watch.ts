// etcdserverpb.Watch: one bidirectional stream per call, translated to a WatchStream of
// the hub (src/watch/types.ts) and back to WatchResponses, as etcd's v3rpc watch server.
import * as grpc from '@grpc/grpc-js';
import type * as pb from '../pb/types';
import type { KeyValue, MvccEvent } from '../mvcc/types';
import type { EtcdServerApi } from '../server/types';
import { callAuth } from './auth';
import type { WatchCreateParams, WatchStream, WatchStreamEvent } from '../watch/types';
import { Code, Errors, type EtcdError } from '../errors';
import type { ApiLogger } from './types';
import { eventSize, watchResponseBaseSize } from './watch_size';

/** etcd adds this to max-request-bytes for gRPC framing; watch fragments use the sum. */
export const GRPC_OVERHEAD_BYTES = 512 * 1024;

/** etcd's clientv3.InvalidWatchID: responses that belong to no single watcher. */
const INVALID_WATCH_ID = -1;

// mvcc's texts for create requests it refuses (sent as cancel_reason, not as gRPC errors).
const ERR_EMPTY_WATCHER_RANGE = 'mvcc: watcher range is empty';
const ERR_WATCHER_DUPLICATE_ID = 'mvcc: duplicate watch ID provided on the WatchStream';

/**
 * Creates whose `created` response has not come back from the hub yet. A client can pile
 * these up only by sending creates faster than the hub answers them; past the bound we
 * end the stream rather than grow.
 */
export const MAX_PENDING_CREATES_PER_STREAM = 1024;

/** Go's codes.Code.String(): the names of our Code table. */
const CODE_NAMES = new Map<number, string>(Object.entries(Code).map(([name, n]) => [n, name]));

/** etcd puts the text of its gRPC status error (not the bare message) in cancel_reason. */
function statusText(e: EtcdError): string {
  return `rpc error: code = ${CODE_NAMES.get(e.code) ?? `Code(${e.code})`} desc = ${e.message}`;
}

export function watchService(server: EtcdServerApi, log: ApiLogger): grpc.UntypedServiceImplementation {
  return {
    Watch: (call: grpc.ServerDuplexStream<pb.WatchRequest, pb.WatchResponse>) => {
      new WatchCall(server, log, call).start();
    },
  };
}

function toPbKv(kv: KeyValue): pb.KeyValue {
  return {
    key: kv.key,
    createRevision: String(kv.createRevision),
    modRevision: String(kv.modRevision),
    version: String(kv.version),
    value: kv.value,
    lease: kv.lease.toString(),
  } as pb.KeyValue;
}

/**
 * Wire events by store event: one committed event goes to every watcher of its key, and the
 * hub hands them all the same MvccEvent object. Frozen, so the encoder may keep their bytes
 * (src/pb/kv_wire.ts) and nothing can change them between watchers.
 */
const pbEvents = new WeakMap<MvccEvent, pb.Event>();

function toPbEvent(ev: MvccEvent): pb.Event {
  let out = pbEvents.get(ev);
  if (out === undefined) {
    out = Object.freeze({
      type: ev.type,
      kv: Object.freeze(toPbKv(ev.kv)),
      prevKv: ev.prevKv ? Object.freeze(toPbKv(ev.prevKv)) : null,
    }) as pb.Event;
    pbEvents.set(ev, out);
  }
  return out;
}

/**
 * The header of live responses: every watcher of one revision gets the same frozen object, which
 * the encoder (src/pb/kv_wire.ts) encodes once. Compared field by field, so a new term, revision
 * or server gets a header of its own.
 */
let sharedHeader: pb.ResponseHeader | undefined;

function shareHeader(h: pb.ResponseHeader): pb.ResponseHeader {
  const s = sharedHeader;
  if (s !== undefined && s.revision === h.revision && s.raftTerm === h.raftTerm && s.memberId === h.memberId && s.clusterId === h.clusterId) return s;
  sharedHeader = Object.freeze(h);
  return sharedHeader;
}

function toNumber(v: string | number | null | undefined): number {
  if (v === undefined || v === null || v === '') return 0;
  const n = Number(v);
  return Number.isSafeInteger(n) ? n : NaN;
}

interface WatcherOptions {
  fragment: boolean;
  /** The client's watch_id (0: the hub picks). */
  requestedId: number;
}

class WatchCall {
  private stream: WatchStream | undefined;
  private closed = false;
  /** Options of creates sent to the hub, oldest first, waiting for their `created`. */
  private readonly pendingCreates: WatcherOptions[] = [];
  /** Options of live watchers by ID. */
  private readonly watchers = new Map<number, WatcherOptions>();
  /** Client-chosen IDs asked for but not yet confirmed, to refuse duplicates early. */
  private readonly requestedIds = new Set<number>();
  private readonly maxResponseBytes: number;

  constructor(
    private readonly server: EtcdServerApi,
    private readonly log: ApiLogger,
    private readonly call: grpc.ServerDuplexStream<pb.WatchRequest, pb.WatchResponse>,
  ) {
    this.maxResponseBytes = server.limits.maxRequestBytes + GRPC_OVERHEAD_BYTES;
  }

  start(): void {
    try {
      this.stream = this.server.openWatchStream((ev) => this.onHubEvent(ev));
    } catch (e) {
      this.fail(e);
      return;
    }
    this.call.on('data', (req: pb.WatchRequest) => this.onRequest(req));
    this.call.on('drain', () => {
      if (!this.closed) this.stream?.resume();
    });
    // A client half-close is not the end in etcd: events keep flowing until it cancels.
    this.call.on('end', () => undefined);
    this.call.on('cancelled', () => this.close());
    this.call.on('close', () => this.close());
    this.call.on('error', (e: unknown) => {
      this.log.debug('watch stream error', { error: e instanceof Error ? e.message : String(e) });
      this.close();
    });
  }

  private close(): void {
    if (this.closed) return;
    this.closed = true;
    this.pendingCreates.length = 0;
    this.watchers.clear();
    this.requestedIds.clear();
    try {
      this.stream?.close();
    } catch (e) {
      this.log.warn('closing watch stream failed', { error: e instanceof Error ? e.message : String(e) });
    }
  }

  private fail(e: unknown): void {
    const msg = e instanceof Error ? e.message : String(e);
    this.log.warn('watch stream failed', { error: msg });
    this.close();
    this.call.emit('error', { code: grpc.status.UNKNOWN, details: msg });
  }

  private onRequest(req: pb.WatchRequest): void {
    if (this.closed || this.stream === undefined) return;
    try {
      if (req.createRequest) this.onCreate(req.createRequest);
      else if (req.cancelRequest) this.onCancel(req.cancelRequest);
      else if (req.progressRequest) this.stream.requestProgress();
      // Anything else is ignored, as etcd does, rather than ending the stream.
    } catch (e) {
      this.fail(e);
    }
  }

  private rejectCreate(reason: string, watchId: number = INVALID_WATCH_ID): void {
    this.send({
      header: this.server.header(),
      watchId: String(watchId),
      created: true,
      canceled: true,
      compactRevision: '0',
      cancelReason: reason,
      fragment: false,
      events: [],
    } as pb.WatchResponse);
  }

  private onCreate(creq: pb.WatchCreateRequest): void {
    const stream = this.stream!;
    // An empty key means the smallest key, "\0".
    const key = creq.key && creq.key.length > 0 ? Buffer.from(creq.key) : Buffer.from([0]);
    const rangeEnd = creq.rangeEnd ? Buffer.from(creq.rangeEnd) : Buffer.alloc(0);
    const startRevision = toNumber(creq.startRevision);
    const watchId = toNumber(creq.watchId);

    if (startRevision < 0) {
      // etcd 3.6 refuses a negative start revision as compacted history.
      this.rejectCreate(Errors.Compacted.message);
      return;
    }
    // etcd checks read permission on the range as the stream's caller, once, at creation (before
    // the range itself); a refused create is answered with watch ID -1 and the reason (etcd's
    // isWatchPermitted).
    const refusal = this.server.auth?.watchRefusal(callAuth(this.call), creq.key ?? Buffer.alloc(0), creq.rangeEnd ?? Buffer.alloc(0));
    if (refusal !== undefined) {
      this.rejectCreate(statusText(refusal));
      return;
    }
    const fromKey = rangeEnd.length === 1 && rangeEnd[0] === 0;
    if (rangeEnd.length > 0 && !fromKey && Buffer.compare(key, rangeEnd) >= 0) {
      this.rejectCreate(ERR_EMPTY_WATCHER_RANGE);
      return;
    }
    if (!Number.isSafeInteger(watchId) || watchId < 0) {
      // Outside what our hub can represent; etcd would accept it, we refuse it visibly.
      this.rejectCreate(ERR_WATCHER_DUPLICATE_ID);
      return;
    }
    if (watchId !== 0 && (this.watchers.has(watchId) || this.requestedIds.has(watchId))) {
      this.rejectCreate(ERR_WATCHER_DUPLICATE_ID);
      return;
    }
    if (this.pendingCreates.length >= MAX_PENDING_CREATES_PER_STREAM) {
      this.fail(new Error('too many watch creates awaiting their response'));
      return;
    }

    const params: WatchCreateParams = {
      key,
      rangeEnd,
      startRevision,
      filters: (creq.filters ?? []).map(Number).filter((f) => f === 0 || f === 1),
      prevKv: Boolean(creq.prevKv),
      progressNotify: Boolean(creq.progressNotify),
      fragment: Boolean(creq.fragment),
      watchId,
    };
    const opts: WatcherOptions = { fragment: params.fragment, requestedId: watchId };
    this.pendingCreates.push(opts);
    if (watchId !== 0) this.requestedIds.add(watchId);
    try {
      stream.create(params);
    } catch (e) {
      // The hub refused without emitting `created`: drop our bookkeeping and answer as etcd.
      const idx = this.pendingCreates.lastIndexOf(opts);
      if (idx >= 0) this.pendingCreates.splice(idx, 1);
      this.requestedIds.delete(watchId);
      const msg = e instanceof Error ? e.message : String(e);
      this.rejectCreate(msg || ERR_WATCHER_DUPLICATE_ID);
    }
  }

  private onCancel(c: pb.WatchCancelRequest): void {
    const id = toNumber(c.watchId);
    if (!Number.isSafeInteger(id)) return;
    // An unknown ID gets no answer, as in etcd.
    this.stream!.cancel(id);
  }

  /** The hub's sink: false asks it to hold further pushes until 'drain'. */
  private onHubEvent(ev: WatchStreamEvent): boolean {
    if (this.closed) return true;
    let opts = this.watchers.get(ev.watchId);
    if (ev.created) {
      opts = this.pendingCreates.shift() ?? { fragment: false, requestedId: 0 };
      this.requestedIds.delete(opts.requestedId);
      if (!ev.canceled) this.watchers.set(ev.watchId, opts);
    } else if (ev.canceled) {
      this.watchers.delete(ev.watchId);
    }

    const wr = {
      header: shareHeader(this.server.header(ev.headerRevision)),
      watchId: String(ev.watchId),
      created: ev.created,
      canceled: ev.canceled,
      compactRevision: String(ev.compactRevision),
      cancelReason: ev.cancelReason,
      fragment: ev.fragment,
      events: ev.events.map(toPbEvent),
    } as pb.WatchResponse;

    if (opts?.fragment && !ev.fragment && wr.events.length > 1) return this.sendFragments(wr);
    return this.send(wr);
  }

  private send(wr: pb.WatchResponse): boolean {
    if (this.closed) return true;
    return this.call.write(wr);
  }

  /** etcd's sendFragments: split the events so each response stays under the limit. */
  private sendFragments(wr: pb.WatchResponse): boolean {
    const base = watchResponseBaseSize({ ...wr, fragment: true } as pb.WatchResponse);
    const sizes = wr.events.map((e) => {
      const s = eventSize(e);
      return 1 + varintLen(s) + s;
    });
    const total = base + sizes.reduce((a, b) => a + b, 0);
    if (total < this.maxResponseBytes) return this.send(wr);

    let ok = true;
    let idx = 0;
    while (idx < wr.events.length) {
      const start = idx;
      let size = base;
      // Always at least one event per fragment, even a single one over the limit.
      while (idx < wr.events.length) {
        if (idx > start && size + sizes[idx]! >= this.maxResponseBytes) break;
        size += sizes[idx]!;
        idx++;
      }
      const last = idx === wr.events.length;
      ok = this.send({ ...wr, fragment: !last, events: wr.events.slice(start, idx) } as pb.WatchResponse) && ok;
    }
    return ok;
  }
}

function varintLen(n: number): number {
  let len = 1;
  while (n >= 0x80) {
    n = Math.floor(n / 128);
    len++;
  }
  return len;
}
