// etcd's v3lockpb.Lock service: a distributed mutex built from ordinary KV operations, the
// same algorithm as etcd's client-side Mutex run inside the server. Waiters put a key
// "<name>/<lease hex>" with their lease; the key with the lowest create revision holds the
// lock, and each waiter watches for the deletion of the waiter just before it.
//
// The primitives at the bottom (sessions, first/last-create reads, waiting for deletions,
// a bounded single-watcher queue) are shared with src/api/v3election.ts.
import assert from 'node:assert';
import * as grpc from '@grpc/grpc-js';
import { Code, EtcdError, etcdError, isEtcdError } from '../errors';
import { createMessage } from '../pb/internal';
import type * as pb from '../pb/types';
import {
  Compare_CompareResult,
  Compare_CompareTarget,
  Event_EventType,
  RangeRequest_SortOrder,
  RangeRequest_SortTarget,
} from '../pb/types';
import type { CallAuth, EtcdServerApi } from '../server/types';
import { callAuth } from './auth';
import type { WatchCreateParams, WatchStream, WatchStreamEvent } from '../watch/types';

export type LockService = {
  Lock: grpc.handleUnaryCall<pb.LockRequest, pb.LockResponse>;
  Unlock: grpc.handleUnaryCall<pb.UnlockRequest, pb.UnlockResponse>;
};

export function createLockService(server: EtcdServerApi): LockService {
  return {
    Lock: concurrencyUnary(server, (api, req, signal) => lock(api, req, signal)),
    Unlock: concurrencyUnary(server, async (api, req) => {
      const resp = await api.deleteRange(createMessage('etcdserverpb.DeleteRangeRequest', { key: req.key }));
      return { header: resp.header };
    }),
  };
}

async function lock(api: ConcurrencyApi, req: pb.LockRequest, signal: AbortSignal): Promise<pb.LockResponse> {
  const lease = await sessionLease(api, req.lease, signal);
  const prefix = Buffer.concat([req.name, SLASH]);
  const myKey = leaseKey(prefix, lease);
  const owner = firstCreateOp(prefix);
  const resp = await api.txn(
    createMessage('etcdserverpb.TxnRequest', {
      compare: [createRevisionIs(myKey, '0')],
      success: [{ requestPut: { key: myKey, value: Buffer.alloc(0), lease } }, owner],
      // The same lease asking again: reuse the key it already has in the queue.
      failure: [{ requestRange: { key: myKey } }, owner],
    }),
  );
  const myRev = resp.succeeded ? headerRevision(resp.header) : rangeKvs(resp.responses[0])[0].createRevision;
  const ownerKvs = rangeKvs(resp.responses[1]);
  if (ownerKvs.length === 0 || ownerKvs[0].createRevision === myRev) {
    return { header: resp.header, key: myKey };
  }

  try {
    await waitDeletes(api, prefix, decrement(myRev), signal);
  } catch (e) {
    // Leave the queue so later waiters are not stuck behind a caller that gave up.
    await deleteKeyQuietly(api, myKey);
    throw e;
  }
  // The lease may have expired while waiting, taking the key (and the claim) with it.
  const check = await api.range(createMessage('etcdserverpb.RangeRequest', { key: myKey }));
  if (check.kvs.length === 0) throw new EtcdError(Code.Unknown, 'mutex: session is expired');
  return { header: check.header, key: myKey };
}

// ---- shared with v3election.ts ----

/** What the lock and election algorithms use of the server. */
export type ConcurrencyApi = Pick<EtcdServerApi, 'range' | 'txn' | 'deleteRange' | 'leaseGrant' | 'openWatchStream' | 'header'>;

/**
 * The server acting for the caller: its reads and writes are checked against the caller's
 * permissions (token or client-certificate CN), as etcd's lock and election services call the KV
 * service with the incoming request's context. With auth enabled and no credentials they fail as
 * a KV call would ('user name is empty').
 */
export function asCaller(server: EtcdServerApi, ctx: CallAuth): ConcurrencyApi {
  return {
    range: (req) => server.range(req, ctx),
    txn: (req) => server.txn(req, ctx),
    deleteRange: (req) => server.deleteRange(req, ctx),
    leaseGrant: (req) => server.leaseGrant(req, ctx),
    openWatchStream: (sink) => server.openWatchStream(sink),
    header: (revision) => server.header(revision),
  };
}

export const SLASH = Buffer.from('/');

/** etcd's clientv3 session TTL when the request names no lease. */
export const DEFAULT_SESSION_TTL_SEC = 60;

/** Buffered watch responses per waiter before the hub is told to hold back. */
const WATCH_QUEUE_SOFT_LIMIT = 64;
/** A hub that ignores back-pressure this long has a bug; fail the waiter, not the process. */
const WATCH_QUEUE_HARD_LIMIT = 1024;

/**
 * The lease a lock or campaign runs under. etcd's server-side session grants a fresh
 * 60-second lease when the request carries none and never keeps it alive.
 */
export async function sessionLease(api: ConcurrencyApi, lease: string, signal: AbortSignal): Promise<string> {
  if (lease !== '0') return lease;
  throwIfAborted(signal);
  const resp = await api.leaseGrant(
    createMessage('etcdserverpb.LeaseGrantRequest', { TTL: String(DEFAULT_SESSION_TTL_SEC), ID: '0' }),
  );
  return resp.ID;
}

/** "<prefix><lease ID in lower-case hex>", as Go's %x prints an int64. */
export function leaseKey(prefix: Buffer, lease: string): Buffer {
  return Buffer.concat([prefix, Buffer.from(BigInt(lease).toString(16))]);
}

/** The end of the range of every key starting with `prefix` (etcd's GetPrefixRangeEnd). */
export function prefixEnd(prefix: Buffer): Buffer {
  for (let i = prefix.length - 1; i >= 0; i--) {
    if (prefix[i] < 0xff) {
      const end = Buffer.from(prefix.subarray(0, i + 1));
      end[i] += 1;
      return end;
    }
  }
  // All 0xff (or empty): everything from the prefix on.
  return Buffer.from([0]);
}

export function createRevisionIs(key: Buffer, rev: string): pb.MessageInit<pb.Compare> {
  return { result: Compare_CompareResult.EQUAL, target: Compare_CompareTarget.CREATE, key, createRevision: rev };
}

/** The oldest key under the prefix (clientv3's WithFirstCreate). */
export function firstCreateOp(prefix: Buffer): pb.MessageInit<pb.RequestOp> {
  return { requestRange: firstCreateRange(prefix) };
}

export function firstCreateRange(prefix: Buffer): pb.MessageInit<pb.RangeRequest> {
  return {
    key: prefix,
    rangeEnd: prefixEnd(prefix),
    sortTarget: RangeRequest_SortTarget.CREATE,
    sortOrder: RangeRequest_SortOrder.ASCEND,
    limit: '1',
  };
}

export function rangeKvs(op: pb.ResponseOp | undefined): pb.KeyValue[] {
  const range = op?.responseRange;
  assert(range !== undefined, 'txn response op is not a range');
  return range.kvs;
}

export function headerRevision(header: pb.ResponseHeader | null): string {
  assert(header !== null, 'response without header');
  return header.revision;
}

export function decrement(rev: string): string {
  return (BigInt(rev) - 1n).toString();
}

/**
 * Wait until no key under `prefix` created at or before `maxCreateRev` remains: repeatedly
 * take the newest such key and wait for its deletion (clientv3 concurrency's waitDeletes).
 * Resolves with the header of the final, empty read.
 */
export async function waitDeletes(
  api: ConcurrencyApi,
  prefix: Buffer,
  maxCreateRev: string,
  signal: AbortSignal,
): Promise<pb.ResponseHeader | null> {
  for (;;) {
    throwIfAborted(signal);
    const resp = await api.range(
      createMessage('etcdserverpb.RangeRequest', {
        key: prefix,
        rangeEnd: prefixEnd(prefix),
        sortTarget: RangeRequest_SortTarget.CREATE,
        sortOrder: RangeRequest_SortOrder.DESCEND,
        limit: '1',
        maxCreateRevision: maxCreateRev,
      }),
    );
    if (resp.kvs.length === 0) return resp.header;
    await waitDelete(api, resp.kvs[0].key, headerRevision(resp.header), signal);
  }
}

/** Resolve once `key` sees a DELETE at or after revision `fromRev`. */
export async function waitDelete(api: ConcurrencyApi, key: Buffer, fromRev: string, signal: AbortSignal): Promise<void> {
  const watch = new SingleWatch(api, { key, startRevision: toRevision(fromRev) });
  try {
    for (;;) {
      const ev = await watch.next(signal);
      if (ev.events.some((e) => e.type === Event_EventType.DELETE)) return;
    }
  } finally {
    watch.close();
  }
}

export function toRevision(rev: string): number {
  const n = Number(rev);
  assert(Number.isSafeInteger(n) && n >= 0, `bad revision ${rev}`);
  return n;
}

async function deleteKeyQuietly(api: ConcurrencyApi, key: Buffer): Promise<void> {
  try {
    await api.deleteRange(createMessage('etcdserverpb.DeleteRangeRequest', { key }));
  } catch {
    // Best effort, as in etcd: the lease still removes the key eventually.
  }
}

/**
 * One watcher on its own watch stream, read with `await next()`. Responses queue here until
 * read; past a soft limit the sink tells the hub to hold back until the queue drains.
 */
export class SingleWatch {
  private readonly stream: WatchStream;
  private readonly queue: WatchStreamEvent[] = [];
  private wake: (() => void) | null = null;
  private held = false;
  private failure: Error | null = null;
  private closed = false;

  constructor(api: ConcurrencyApi, params: Partial<WatchCreateParams> & { key: Buffer }) {
    this.stream = api.openWatchStream((ev) => this.push(ev));
    try {
      this.createWatcher(params);
    } catch (e) {
      this.close();
      throw e;
    }
  }

  private createWatcher(params: Partial<WatchCreateParams> & { key: Buffer }): void {
    this.stream.create({
      key: params.key,
      rangeEnd: params.rangeEnd ?? Buffer.alloc(0),
      startRevision: params.startRevision ?? 0,
      filters: params.filters ?? [],
      prevKv: params.prevKv ?? false,
      progressNotify: false,
      fragment: false,
      watchId: 0,
    });
  }

  /** The next response carrying events; throws when the watch is canceled or `signal` fires. */
  async next(signal: AbortSignal): Promise<WatchStreamEvent> {
    for (;;) {
      throwIfAborted(signal);
      if (this.failure !== null) throw this.failure;
      const ev = this.queue.shift();
      if (ev !== undefined) {
        if (this.held && this.queue.length <= WATCH_QUEUE_SOFT_LIMIT / 2) {
          this.held = false;
          this.stream.resume();
        }
        if (ev.canceled) throw watchCanceledError(ev);
        if (ev.events.length > 0) return ev;
        continue;
      }
      await new Promise<void>((resolve) => {
        const onAbort = (): void => resolve();
        signal.addEventListener('abort', onAbort, { once: true });
        this.wake = () => {
          signal.removeEventListener('abort', onAbort);
          resolve();
        };
      });
      this.wake = null;
    }
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.queue.length = 0;
    this.stream.close();
  }

  private push(ev: WatchStreamEvent): boolean {
    if (this.closed) return true;
    if (this.queue.length >= WATCH_QUEUE_HARD_LIMIT) {
      this.failure = new EtcdError(Code.Unknown, 'watch buffer overflow');
    } else {
      this.queue.push(ev);
    }
    this.wake?.();
    if (this.queue.length >= WATCH_QUEUE_SOFT_LIMIT) this.held = true;
    return !this.held;
  }
}

function watchCanceledError(ev: WatchStreamEvent): Error {
  if (ev.compactRevision > 0) return etcdError('Compacted');
  return new EtcdError(Code.Unknown, ev.cancelReason !== '' ? ev.cancelReason : 'watch canceled');
}

// ---- gRPC glue ----

/** Go's context error texts, which etcd's lock/election servers return as-is. */
const CONTEXT_CANCELED = 'context canceled';

export function throwIfAborted(signal: AbortSignal): void {
  if (signal.aborted) throw new EtcdError(Code.Unknown, CONTEXT_CANCELED);
}

/**
 * etcd serves Lock and Election through an embedded client, so every error reaches the
 * caller as gRPC code Unknown carrying the original message (e.g. a missing lease answers
 * Unknown "etcdserver: requested lease not found", not NotFound). Checked against etcd 3.4.
 */
export function asConcurrencyError(e: unknown): EtcdError {
  if (isEtcdError(e)) return e.code === Code.Unknown ? e : new EtcdError(Code.Unknown, e.message);
  return new EtcdError(Code.Unknown, e instanceof Error ? e.message : String(e));
}

/** An AbortSignal that fires when the client cancels the call or its deadline passes. */
export function callSignal(call: { on(event: 'cancelled', listener: () => void): unknown; cancelled: boolean }): AbortSignal {
  const ac = new AbortController();
  if (call.cancelled) ac.abort();
  else call.on('cancelled', () => ac.abort());
  return ac.signal;
}

export function concurrencyUnary<Req, Res>(
  server: EtcdServerApi,
  fn: (api: ConcurrencyApi, req: Req, signal: AbortSignal) => Promise<Res>,
): grpc.handleUnaryCall<Req, Res> {
  return (call, callback) => {
    const signal = callSignal(call);
    fn(asCaller(server, callAuth(call)), call.request, signal).then(
      (res) => callback(null, res),
      (e: unknown) => callback(asConcurrencyError(e)),
    );
  };
}
