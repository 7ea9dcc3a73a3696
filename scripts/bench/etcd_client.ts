// A lean etcd v3 client for the harness's own load generator (large-store, idle-watchers, kube-mix).
// It speaks to both systems through the same code: @grpc/grpc-js with protobufjs encode/decode of
// this repository's proto/ files, and no conversion to proto-loader objects (that conversion is
// most of a Node client's CPU per request, and the generator's cost must stay small).
import assert from 'node:assert';
import fs from 'node:fs';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import * as protobuf from 'protobufjs';

/** Large enough for a page of 500 kube-sized objects or a txn of 128 puts. */
const MAX_MESSAGE_BYTES = 64 * 1024 * 1024;
/**
 * The receive window, per stream and per connection, that the generator grants the server. grpc-js
 * keeps HTTP/2's 64 KiB unless told, so a 0.5 MiB list page would cross in eight window round trips,
 * each waiting for the generator's own busy event loop. The clients this harness stands for are Go:
 * grpc-go grows its windows by bandwidth-delay estimation up to 16 MiB, and widens a stream's window
 * to the size of a message it has started reading. 16 MiB is that bound.
 */
const FLOW_CONTROL_WINDOW_BYTES = 16 * 1024 * 1024;

export interface KeyValue {
  key: Buffer;
  value: Buffer;
  createRevision: number;
  modRevision: number;
  version: number;
}

export interface RangeRequest {
  key: Buffer;
  rangeEnd?: Buffer;
  limit?: number;
  revision?: number;
  serializable?: boolean;
  keysOnly?: boolean;
  countOnly?: boolean;
}

export interface RangeResponse {
  revision: number;
  kvs: KeyValue[];
  more: boolean;
  count: number;
}

/** A compare with result EQUAL on the create or mod revision (what kube's storage uses). */
export interface RevisionCompare {
  target: 'create' | 'mod';
  key: Buffer;
  revision: number;
}

export type RequestOp =
  | { put: { key: Buffer; value: Buffer } }
  | { range: RangeRequest }
  | { deleteRange: { key: Buffer; rangeEnd?: Buffer } };

export interface ResponseOp {
  range?: RangeResponse;
  deleted?: number;
}

export interface TxnResponse {
  revision: number;
  succeeded: boolean;
  responses: ResponseOp[];
}

export interface WatchEvent {
  type: 'PUT' | 'DELETE';
  kv: KeyValue;
  prevKv?: KeyValue;
}

export interface WatchResponse {
  revision: number;
  watchId: number;
  created: boolean;
  canceled: boolean;
  cancelReason: string;
  compactRevision: number;
  events: WatchEvent[];
}

export interface WatchCreate {
  key: Buffer;
  rangeEnd?: Buffer;
  startRevision?: number;
  prevKv?: boolean;
}

/** protobufjs decodes int64 as Long (the `long` package is installed) or as number. */
type Int64 = number | { toNumber(): number };
function num(v: Int64 | null | undefined): number {
  if (v === null || v === undefined) return 0;
  return typeof v === 'number' ? v : v.toNumber();
}

// Decoded protobufjs messages: only the fields read here.
interface PbHeader { revision?: Int64 }
type PbBytes = Uint8Array | readonly number[];
interface PbKv { key?: PbBytes; value?: PbBytes; createRevision?: Int64; modRevision?: Int64; version?: Int64 }
interface PbRangeResponse { header?: PbHeader; kvs?: PbKv[]; more?: boolean; count?: Int64 }
interface PbResponseOp { responseRange?: PbRangeResponse; responseDeleteRange?: { deleted?: Int64 } }
interface PbTxnResponse { header?: PbHeader; succeeded?: boolean; responses?: PbResponseOp[] }
interface PbEvent { type?: number; kv?: PbKv; prevKv?: PbKv }
interface PbWatchResponse {
  header?: PbHeader; watchId?: Int64; created?: boolean; canceled?: boolean; cancelReason?: string;
  compactRevision?: Int64; events?: PbEvent[];
}

interface Codec {
  rangeReq: protobuf.Type;
  rangeRes: protobuf.Type;
  txnReq: protobuf.Type;
  txnRes: protobuf.Type;
  compactReq: protobuf.Type;
  compactRes: protobuf.Type;
  watchReq: protobuf.Type;
  watchRes: protobuf.Type;
}

let cachedCodec: Codec | undefined;

/** proto/ sits three levels above this file, in the live tree's dist/ and in the bench snapshot. */
function protoDir(): string {
  const candidates = [path.resolve(__dirname, '../../../proto'), path.resolve(__dirname, '../../proto')];
  for (const c of candidates) {
    try {
      fs.accessSync(path.join(c, 'etcdserverpb/rpc.proto'));
      return c;
    } catch {
      // try the next one
    }
  }
  throw new Error(`proto/ not found near ${__dirname}`);
}

function codec(): Codec {
  if (cachedCodec) return cachedCodec;
  const dir = protoDir();
  const root = new protobuf.Root();
  root.resolvePath = (_origin: string, target: string) => path.join(dir, target);
  root.loadSync(['etcdserverpb/rpc.proto'], { keepCase: false });
  root.resolveAll();
  const t = (n: string): protobuf.Type => root.lookupType(`etcdserverpb.${n}`);
  cachedCodec = {
    rangeReq: t('RangeRequest'),
    rangeRes: t('RangeResponse'),
    txnReq: t('TxnRequest'),
    txnRes: t('TxnResponse'),
    compactReq: t('CompactionRequest'),
    compactRes: t('CompactionResponse'),
    watchReq: t('WatchRequest'),
    watchRes: t('WatchResponse'),
  };
  return cachedCodec;
}

const EMPTY = Buffer.alloc(0);

/** protobufjs leaves an absent bytes field as its prototype default, an empty plain array. */
function toBuffer(b: Uint8Array | readonly number[] | undefined): Buffer {
  if (!b || b.length === 0) return EMPTY;
  if (Buffer.isBuffer(b)) return b;
  return b instanceof Uint8Array ? Buffer.from(b.buffer, b.byteOffset, b.byteLength) : Buffer.from(b);
}

function kvFrom(k: PbKv): KeyValue {
  return {
    key: toBuffer(k.key),
    value: toBuffer(k.value),
    createRevision: num(k.createRevision),
    modRevision: num(k.modRevision),
    version: num(k.version),
  };
}

function watchResponseFrom(r: PbWatchResponse): WatchResponse {
  return {
    revision: num(r.header?.revision),
    watchId: num(r.watchId),
    created: r.created === true,
    canceled: r.canceled === true,
    cancelReason: r.cancelReason ?? '',
    compactRevision: num(r.compactRevision),
    events: (r.events ?? []).map((e) => ({
      type: e.type === 1 ? 'DELETE' : 'PUT',
      kv: kvFrom(e.kv ?? {}),
      prevKv: e.prevKv ? kvFrom(e.prevKv) : undefined,
    })),
  };
}

function rangeFrom(r: PbRangeResponse): RangeResponse {
  return { revision: num(r.header?.revision), kvs: (r.kvs ?? []).map(kvFrom), more: r.more === true, count: num(r.count) };
}

function opToPb(op: RequestOp): Record<string, unknown> {
  if ('put' in op) return { requestPut: op.put };
  if ('range' in op) return { requestRange: op.range };
  return { requestDeleteRange: op.deleteRange };
}

const COMPARE_TARGET = { create: 1, mod: 2 } as const;

function compareToPb(c: RevisionCompare): Record<string, unknown> {
  return c.target === 'create'
    ? { result: 0, target: COMPARE_TARGET.create, key: c.key, createRevision: c.revision }
    : { result: 0, target: COMPARE_TARGET.mod, key: c.key, modRevision: c.revision };
}

function serializer(t: protobuf.Type): (v: object) => Buffer {
  return (v) => toBuffer(t.encode(v).finish());
}

function deserializer<T>(t: protobuf.Type): (b: Buffer) => T {
  return (b) => t.decode(b) as unknown as T;
}

/**
 * One gRPC connection (its own subchannel, so N of these are N TCP connections). Every unary
 * call carries a deadline: a dead endpoint fails the call instead of hanging the harness.
 */
export class EtcdConnection {
  private readonly client: grpc.Client;
  private readonly c: Codec;
  private readonly streams = new Set<grpc.ClientDuplexStream<object, PbWatchResponse>>();

  constructor(readonly endpoint: string) {
    this.c = codec();
    this.client = new grpc.Client(endpoint, grpc.credentials.createInsecure(), {
      'grpc.use_local_subchannel_pool': 1,
      'grpc.max_receive_message_length': MAX_MESSAGE_BYTES,
      'grpc.max_send_message_length': MAX_MESSAGE_BYTES,
      'grpc-node.flow_control_window': FLOW_CONTROL_WINDOW_BYTES,
    });
  }

  private unary<Res>(method: string, reqType: protobuf.Type, resType: protobuf.Type, req: object, timeoutMs: number): Promise<Res> {
    assert(timeoutMs > 0);
    return new Promise((resolve, reject) => {
      this.client.makeUnaryRequest(
        method,
        serializer(reqType),
        deserializer<Res>(resType),
        req,
        new grpc.Metadata(),
        { deadline: Date.now() + timeoutMs },
        (err, res) => (err || res === undefined ? reject(err ?? new Error(`${method}: empty response`)) : resolve(res)),
      );
    });
  }

  async range(req: RangeRequest, timeoutMs: number): Promise<RangeResponse> {
    const r = await this.unary<PbRangeResponse>('/etcdserverpb.KV/Range', this.c.rangeReq, this.c.rangeRes, req, timeoutMs);
    return rangeFrom(r);
  }

  async txn(compare: RevisionCompare[], success: RequestOp[], failure: RequestOp[], timeoutMs: number): Promise<TxnResponse> {
    const req = { compare: compare.map(compareToPb), success: success.map(opToPb), failure: failure.map(opToPb) };
    const r = await this.unary<PbTxnResponse>('/etcdserverpb.KV/Txn', this.c.txnReq, this.c.txnRes, req, timeoutMs);
    return {
      revision: num(r.header?.revision),
      succeeded: r.succeeded === true,
      responses: (r.responses ?? []).map((op) => ({
        range: op.responseRange ? rangeFrom(op.responseRange) : undefined,
        deleted: op.responseDeleteRange ? num(op.responseDeleteRange.deleted) : undefined,
      })),
    };
  }

  /** physical: the call returns once the compaction has been applied to the backend. */
  async compact(revision: number, physical: boolean, timeoutMs: number): Promise<number> {
    const r = await this.unary<{ header?: PbHeader }>('/etcdserverpb.KV/Compact', this.c.compactReq, this.c.compactRes, { revision, physical }, timeoutMs);
    return num(r.header?.revision);
  }

  /** Opens a Watch stream (no deadline: it lives until closed). */
  watchStream(onResponse: (r: WatchResponse) => void, onEnd: (err: Error | null) => void): WatchStream {
    const call = this.client.makeBidiStreamRequest(
      '/etcdserverpb.Watch/Watch',
      serializer(this.c.watchReq),
      deserializer<PbWatchResponse>(this.c.watchRes),
      new grpc.Metadata(),
      {},
    );
    this.streams.add(call);
    let ended = false;
    const end = (err: Error | null): void => {
      if (ended) return;
      ended = true;
      this.streams.delete(call);
      onEnd(err);
    };
    call.on('data', (r: PbWatchResponse) => {
      let res: WatchResponse;
      try {
        res = watchResponseFrom(r);
      } catch (e) {
        // A response we cannot read ends this stream, not the harness.
        call.cancel();
        end(e as Error);
        return;
      }
      onResponse(res);
    });
    call.on('error', (e: Error) => end(e));
    call.on('end', () => end(null));
    return {
      create: (w: WatchCreate) => {
        call.write({ createRequest: { key: w.key, rangeEnd: w.rangeEnd, startRevision: w.startRevision ?? 0, prevKv: w.prevKv === true } });
      },
      close: () => {
        call.cancel();
        end(null);
      },
    };
  }

  /** Cancels every open stream and closes the channel (pending unary calls fail). */
  close(): void {
    for (const s of this.streams) s.cancel();
    this.streams.clear();
    this.client.close();
  }
}

export interface WatchStream {
  create(w: WatchCreate): void;
  close(): void;
}

/** The key range of everything under `prefix` (etcd's prefix convention: last byte + 1). */
export function prefixEnd(prefix: Buffer): Buffer {
  const end = Buffer.from(prefix);
  for (let i = end.length - 1; i >= 0; i--) {
    if (end[i] < 0xff) {
      end[i]++;
      return end.subarray(0, i + 1);
    }
  }
  return Buffer.from([0]);
}

/** The smallest key after `key`: where a paged list continues (what kube's storage does). */
export function keyAfter(key: Buffer): Buffer {
  return Buffer.concat([key, Buffer.from([0])]);
}
