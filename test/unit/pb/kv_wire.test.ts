// The hand-written codecs of the hot messages against protobufjs on randomized messages: same
// bytes when encoding (protobufjs 8, which the raft entry used so far), same objects (values,
// types and key order) when decoding, whatever encoder wrote the bytes.
import * as grpc from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import { packageDefinition, serviceDefinition } from '../../../src/pb/load';
import { decodeInternalRequest, decodeMessage, encodeInternalRequest, encodeMessage } from '../../../src/pb/internal';
import { decodeInternalFast, encodeInternalFast } from '../../../src/pb/internal_wire';
import {
  decodeDeleteRangeRequest,
  decodePutRequest,
  decodeRangeRequest,
  decodeTxnRequest,
  encodeDeleteRangeResponse,
  encodePutResponse,
  encodeRangeResponse,
  encodeTxnResponse,
  encodeWatchResponse,
} from '../../../src/pb/kv_wire';
import { withFastCodecs } from '../../../src/pb/service_codecs';
import type { MessageName } from '../../../src/pb/types';
import { NotFast, Reader, Writer, int64Size, int64Wire } from '../../../src/pb/wire';
import { mulberry32 } from '../../helpers/random';

const MAX_U64 = 18446744073709551615n;
const MAX_I64 = 9223372036854775807n;

const rng = mulberry32;

class Gen {
  constructor(readonly r: () => number) {}
  int(n: number): number {
    return Math.floor(this.r() * n);
  }
  bool(): boolean {
    return this.r() < 0.5;
  }
  maybe<T>(f: () => T): T | undefined {
    return this.r() < 0.5 ? f() : undefined;
  }
  big(max: bigint): bigint {
    let v = 0n;
    for (let i = 0; i < 4; i++) v = (v << 16n) | BigInt(this.int(65536));
    return v % (max + 1n);
  }
  /** int64 as our objects carry it: a decimal string across every magnitude, signs included. */
  int64(unsigned = false): string {
    switch (this.int(8)) {
      case 0:
        return '0';
      case 1:
        return String(this.int(128));
      case 2:
        return String(this.int(2 ** 31));
      case 3:
        return String(Math.floor(this.r() * Number.MAX_SAFE_INTEGER));
      case 4:
        return this.big(unsigned ? MAX_U64 : MAX_I64).toString();
      case 5:
        return unsigned ? MAX_U64.toString() : MAX_I64.toString();
      case 6:
        return unsigned ? String(this.int(1000)) : String(-1 - this.int(2 ** 40));
      default:
        return unsigned ? this.big(MAX_U64).toString() : (-this.big(MAX_I64) - 1n).toString();
    }
  }
  bytes(): Buffer {
    const len = [0, 0, 1, 8, 200][this.int(5)];
    const b = Buffer.alloc(len);
    for (let i = 0; i < len; i++) b[i] = this.int(256);
    return b;
  }
  str(): string {
    return ['', 'root', 'üsér-名前', 'x'.repeat(150)][this.int(4)];
  }
  enumOf(n: number): number {
    return this.int(n);
  }

  rangeRequest(): Record<string, unknown> {
    return {
      key: this.bytes(),
      rangeEnd: this.maybe(() => this.bytes()),
      limit: this.maybe(() => this.int64()),
      revision: this.maybe(() => this.int64()),
      sortOrder: this.maybe(() => this.enumOf(3)),
      sortTarget: this.maybe(() => this.enumOf(5)),
      serializable: this.maybe(() => this.bool()),
      keysOnly: this.maybe(() => this.bool()),
      countOnly: this.maybe(() => this.bool()),
      minModRevision: this.maybe(() => this.int64()),
      maxModRevision: this.maybe(() => this.int64()),
      minCreateRevision: this.maybe(() => this.int64()),
      maxCreateRevision: this.maybe(() => this.int64()),
    };
  }
  putRequest(): Record<string, unknown> {
    return {
      key: this.bytes(),
      value: this.maybe(() => this.bytes()),
      lease: this.maybe(() => this.int64()),
      prevKv: this.maybe(() => this.bool()),
      ignoreValue: this.maybe(() => this.bool()),
      ignoreLease: this.maybe(() => this.bool()),
    };
  }
  deleteRangeRequest(): Record<string, unknown> {
    return { key: this.bytes(), rangeEnd: this.maybe(() => this.bytes()), prevKv: this.maybe(() => this.bool()) };
  }
  compare(): Record<string, unknown> {
    const c: Record<string, unknown> = { result: this.enumOf(4), target: this.enumOf(5), key: this.bytes() };
    const member = this.int(6);
    if (member === 0) c.version = this.int64();
    if (member === 1) c.createRevision = this.int64();
    if (member === 2) c.modRevision = this.int64();
    if (member === 3) c.value = this.bytes();
    if (member === 4) c.lease = this.int64();
    if (this.bool()) c.rangeEnd = this.bytes();
    return c;
  }
  requestOp(depth: number): Record<string, unknown> {
    switch (this.int(depth > 0 ? 5 : 4)) {
      case 0:
        return { requestRange: this.rangeRequest() };
      case 1:
        return { requestPut: this.putRequest() };
      case 2:
        return { requestDeleteRange: this.deleteRangeRequest() };
      case 3:
        return {};
      default:
        return { requestTxn: this.txnRequest(depth - 1) };
    }
  }
  txnRequest(depth = 2): Record<string, unknown> {
    const n = (): number => this.int(4);
    return {
      compare: Array.from({ length: n() }, () => this.compare()),
      success: Array.from({ length: n() }, () => this.requestOp(depth)),
      failure: this.maybe(() => Array.from({ length: n() }, () => this.requestOp(depth))),
    };
  }

  header(): Record<string, unknown> {
    return { clusterId: this.int64(true), memberId: this.int64(true), revision: this.int64(), raftTerm: this.int64(true) };
  }
  keyValue(): Record<string, unknown> {
    return {
      key: this.bytes(),
      createRevision: this.int64(),
      modRevision: this.int64(),
      version: this.int64(),
      value: this.bytes(),
      lease: this.int64(),
    };
  }
  kvs(): Array<Record<string, unknown>> {
    return Array.from({ length: this.int(4) }, () => this.keyValue());
  }
  rangeResponse(): Record<string, unknown> {
    return { header: this.maybe(() => this.header()) ?? null, kvs: this.kvs(), more: this.bool(), count: this.int64() };
  }
  putResponse(): Record<string, unknown> {
    return { header: this.header(), prevKv: this.maybe(() => this.keyValue()) ?? null };
  }
  deleteRangeResponse(): Record<string, unknown> {
    return { header: this.header(), deleted: this.int64(), prevKvs: this.kvs() };
  }
  responseOp(depth: number): Record<string, unknown> {
    switch (this.int(depth > 0 ? 4 : 3)) {
      case 0:
        return { responseRange: this.rangeResponse(), response: 'responseRange' };
      case 1:
        return { responsePut: this.putResponse(), response: 'responsePut' };
      case 2:
        return { responseDeleteRange: this.deleteRangeResponse(), response: 'responseDeleteRange' };
      default:
        return { responseTxn: this.txnResponse(depth - 1), response: 'responseTxn' };
    }
  }
  txnResponse(depth = 2): Record<string, unknown> {
    return { header: this.header(), succeeded: this.bool(), responses: Array.from({ length: this.int(4) }, () => this.responseOp(depth)) };
  }
  watchResponse(): Record<string, unknown> {
    return {
      header: this.header(),
      watchId: this.int64(),
      created: this.bool(),
      canceled: this.bool(),
      compactRevision: this.int64(),
      cancelReason: this.str(),
      fragment: this.bool(),
      events: Array.from({ length: this.int(4) }, () => ({
        type: this.enumOf(2),
        kv: this.keyValue(),
        prevKv: this.maybe(() => this.keyValue()) ?? null,
      })),
    };
  }
  internalRequest(): Record<string, unknown> {
    const req: Record<string, unknown> = {};
    if (this.bool()) req.ID = this.int64(true);
    if (this.r() < 0.8 || req.ID === undefined) {
      req.header = { ID: this.int64(true), username: this.maybe(() => this.str()), authRevision: this.maybe(() => this.int64(true)) };
    }
    switch (this.int(5)) {
      case 0:
        req.put = this.putRequest();
        break;
      case 1:
        req.range = this.rangeRequest();
        break;
      case 2:
        req.deleteRange = this.deleteRangeRequest();
        break;
      case 3:
        req.txn = this.txnRequest();
        break;
      default:
        req.compaction = { revision: this.int64(), physical: this.maybe(() => this.bool()) };
    }
    return req;
  }
}

const ROUNDS = 400;

function varint(n: number): Buffer {
  const out: number[] = [];
  while (n >= 0x80) {
    out.push((n & 0x7f) | 0x80);
    n >>>= 7;
  }
  out.push(n);
  return Buffer.from(out);
}

/** Deep equality that also checks key order and Buffer-ness, as a consumer iterating keys would see. */
function expectSameObject(actual: unknown, expected: unknown): void {
  expect(actual).toStrictEqual(expected);
  expect(shape(actual)).toEqual(shape(expected));
}

function shape(v: unknown): unknown {
  if (Buffer.isBuffer(v)) return 'Buffer';
  if (Array.isArray(v)) return v.map(shape);
  if (v !== null && typeof v === 'object') return Object.entries(v).map(([k, x]) => [k, shape(x)]);
  return typeof v;
}

/**
 * The reference codec: proto-loader's own (its bundled protobufjs 7, which writes the zero scalars
 * it is given, as some clients' encoders do), not the one the server builds (src/pb/load.ts).
 */
function method(service: string, name: string): grpc.MethodDefinition<unknown, unknown> {
  return (packageDefinition()[service] as grpc.ServiceDefinition)[name] as grpc.MethodDefinition<unknown, unknown>;
}

describe('KV request decoders', () => {
  const cases: Array<[string, string, (b: Buffer) => unknown, (g: Gen) => Record<string, unknown>]> = [
    ['Range', 'etcdserverpb.RangeRequest', decodeRangeRequest, (g) => g.rangeRequest()],
    ['Put', 'etcdserverpb.PutRequest', decodePutRequest, (g) => g.putRequest()],
    ['DeleteRange', 'etcdserverpb.DeleteRangeRequest', decodeDeleteRangeRequest, (g) => g.deleteRangeRequest()],
    ['Txn', 'etcdserverpb.TxnRequest', decodeTxnRequest, (g) => g.txnRequest()],
  ];
  for (const [rpc, type, decode, gen] of cases) {
    it(`${rpc}: same object as proto-loader for bytes from either protobufjs (zeros written or omitted)`, () => {
      const m = method('etcdserverpb.KV', rpc);
      const g = new Gen(rng(rpc.length * 7919));
      for (let i = 0; i < ROUNDS; i++) {
        const obj = gen(g);
        // proto-loader's protobufjs 7 writes zero scalars it is given; protobufjs 8 omits them (as etcd's gogo).
        for (const bytes of [m.requestSerialize(obj), encodeMessage(type as MessageName, obj as never)]) {
          expectSameObject(decode(bytes), m.requestDeserialize(bytes));
        }
      }
    });
  }

  it('skips unknown fields as protobufjs does, and defers to it on malformed input', () => {
    // The codec the server falls back to (protobufjs 8): a field of a known number sent with
    // another wire type is skipped as an unknown one, as protobuf's own libraries do.
    const m = serviceDefinition('etcdserverpb.KV').Put as grpc.MethodDefinition<unknown, unknown>;
    const base = m.requestSerialize({ key: Buffer.from('k'), value: Buffer.from('v'), lease: '7' });
    // field 15 varint, field 16 length-delimited, field 17 fixed32, field 18 fixed64
    const unknown = Buffer.from([0x78, 0x96, 0x01, 0x82, 0x01, 0x02, 0xaa, 0xbb, 0x8d, 0x01, 1, 2, 3, 4, 0x91, 0x01, 1, 2, 3, 4, 5, 6, 7, 8]);
    const withUnknown = Buffer.concat([base, unknown]);
    expectSameObject(decodePutRequest(withUnknown), m.requestDeserialize(withUnknown));
    // Truncated: the fast decoder must not guess.
    expect(() => decodePutRequest(base.subarray(0, base.length - 1))).toThrow(NotFast);
    // Key sent as a varint (wrong wire type).
    expect(() => decodePutRequest(Buffer.from([0x08, 0x01]))).toThrow(NotFast);
    // Through the service definition the fallback gives protobufjs's answer either way.
    const fast = withFastCodecs('etcdserverpb.KV', serviceDefinition('etcdserverpb.KV')).Put as grpc.MethodDefinition<unknown, unknown>;
    expectSameObject(fast.requestDeserialize(withUnknown), m.requestDeserialize(withUnknown));
    const bad = Buffer.from([0x08, 0x01]);
    let slow: unknown;
    let slowErr: unknown;
    try {
      slow = m.requestDeserialize(bad);
    } catch (e) {
      slowErr = e;
    }
    if (slowErr) expect(() => fast.requestDeserialize(bad)).toThrow();
    else expect(fast.requestDeserialize(bad)).toStrictEqual(slow);
  });

  it('reads int64 extremes exactly (signed, above 2^53, ten-byte negatives)', () => {
    const m = method('etcdserverpb.KV', 'Range');
    for (const v of ['0', '1', '127', '128', '9007199254740991', '9007199254740993', MAX_I64.toString(), '-1', (-MAX_I64 - 1n).toString()]) {
      const bytes = m.requestSerialize({ key: Buffer.from('a'), limit: v, revision: v });
      const got = decodeRangeRequest(bytes);
      expect(got.limit).toBe(v);
      expect(got).toStrictEqual(m.requestDeserialize(bytes));
    }
  });

  it('gives Buffers for bytes fields, empty ones when absent or empty', () => {
    const got = decodePutRequest(Buffer.alloc(0));
    expect(Buffer.isBuffer(got.key) && got.key.length === 0).toBe(true);
    expect(Buffer.isBuffer(got.value) && got.value.length === 0).toBe(true);
    const r = decodeRangeRequest(Buffer.from([0x0a, 0x00, 0x12, 0x01, 0x00]));
    expect(r.key).toEqual(Buffer.alloc(0));
    expect(r.rangeEnd).toEqual(Buffer.from([0]));
  });
});

describe('KV and watch response encoders', () => {
  const cases: Array<[string, string, (o: never) => Buffer, (g: Gen) => Record<string, unknown>]> = [
    ['Range', 'etcdserverpb.RangeResponse', encodeRangeResponse, (g) => g.rangeResponse()],
    ['Put', 'etcdserverpb.PutResponse', encodePutResponse, (g) => g.putResponse()],
    ['DeleteRange', 'etcdserverpb.DeleteRangeResponse', encodeDeleteRangeResponse, (g) => g.deleteRangeResponse()],
    ['Txn', 'etcdserverpb.TxnResponse', encodeTxnResponse, (g) => g.txnResponse()],
    ['Watch', 'etcdserverpb.WatchResponse', encodeWatchResponse, (g) => g.watchResponse()],
  ];
  for (const [rpc, type, encode, gen] of cases) {
    it(`${rpc}: protobufjs 8's bytes, which a client decodes to what the old encoder's bytes gave`, () => {
      const service = rpc === 'Watch' ? 'etcdserverpb.Watch' : 'etcdserverpb.KV';
      const m = method(service, rpc);
      const g = new Gen(rng(rpc.length * 104729));
      for (let i = 0; i < ROUNDS; i++) {
        const obj = gen(g);
        const mine = encode(obj as never);
        expect(mine.equals(encodeMessage(type as MessageName, obj as never))).toBe(true);
        expect(m.responseDeserialize(mine)).toStrictEqual(m.responseDeserialize(m.responseSerialize(obj)));
      }
    });
  }

  it('accepts safe-integer numbers for int64 fields and defers other values to protobufjs', () => {
    const m = method('etcdserverpb.KV', 'Put');
    const obj = { header: { clusterId: 5, memberId: '6', revision: 7, raftTerm: 0 }, prevKv: null };
    expect(encodePutResponse(obj).equals(encodeMessage('etcdserverpb.PutResponse', obj as never))).toBe(true);
    for (const odd of [{ header: { revision: '12abc' } }, { header: { revision: 1.5 } }, { header: { revision: 10n } }, { header: 'x' }, { prevKv: { key: 'a2V5' } }]) {
      expect(() => encodePutResponse(odd as never)).toThrow(NotFast);
      const fast = withFastCodecs('etcdserverpb.KV', serviceDefinition('etcdserverpb.KV')).Put as grpc.MethodDefinition<unknown, unknown>;
      let want: Buffer | undefined;
      try {
        want = m.responseSerialize(odd);
      } catch {
        want = undefined;
      }
      if (want === undefined) expect(() => fast.responseSerialize(odd)).toThrow();
      else expect(fast.responseSerialize(odd).equals(want)).toBe(true);
    }
  });

  it('encodes a frozen event shared by many responses once, and unfrozen ones afresh each time', () => {
    const g = new Gen(rng(5));
    for (let i = 0; i < 50; i++) {
      const wr = g.watchResponse();
      const events = wr.events as Array<Record<string, unknown>>;
      const frozen = events.map((e) =>
        Object.freeze({ ...e, kv: Object.freeze({ ...(e.kv as object) }), prevKv: e.prevKv ? Object.freeze({ ...(e.prevKv as object) }) : null }),
      );
      const want = encodeMessage('etcdserverpb.WatchResponse', wr as never);
      expect(encodeWatchResponse({ ...wr, events: frozen }).equals(want)).toBe(true);
      // Second time from the kept bytes, in another response around them.
      const other = { ...wr, watchId: '77', events: frozen };
      expect(encodeWatchResponse(other).equals(encodeMessage('etcdserverpb.WatchResponse', other as never))).toBe(true);
    }
    const ev = { type: 0, kv: { key: Buffer.from('a'), modRevision: '5' }, prevKv: null };
    const first = encodeWatchResponse({ events: [ev] });
    ev.kv.modRevision = '6';
    const second = encodeWatchResponse({ events: [ev] });
    expect(second.equals(first)).toBe(false);
    expect(second.equals(encodeMessage('etcdserverpb.WatchResponse', { events: [ev] } as never))).toBe(true);
  });

  it('encodes a frozen header shared by many responses once, and unfrozen ones afresh each time', () => {
    const g = new Gen(rng(6));
    for (let i = 0; i < 50; i++) {
      const wr = g.watchResponse();
      if (!wr.header) continue;
      const header = Object.freeze({ ...(wr.header as object) });
      const want = encodeMessage('etcdserverpb.WatchResponse', wr as never);
      expect(encodeWatchResponse({ ...wr, header }).equals(want)).toBe(true);
      // Second time from the kept bytes, beside other fields; and in a put response.
      const other = { ...wr, header, watchId: '77' };
      expect(encodeWatchResponse(other).equals(encodeMessage('etcdserverpb.WatchResponse', other as never))).toBe(true);
      expect(encodePutResponse({ header }).equals(encodeMessage('etcdserverpb.PutResponse', { header } as never))).toBe(true);
    }
    const header = { clusterId: '1', memberId: '2', revision: '5', raftTerm: '3' };
    const first = encodeWatchResponse({ header });
    header.revision = '6';
    const second = encodeWatchResponse({ header });
    expect(second.equals(first)).toBe(false);
    expect(second.equals(encodeMessage('etcdserverpb.WatchResponse', { header } as never))).toBe(true);
  });

  it('leaves methods without a fast codec and other services untouched', () => {
    const kv = serviceDefinition('etcdserverpb.KV');
    const fast = withFastCodecs('etcdserverpb.KV', kv);
    expect(fast.Compact).toBe(kv.Compact);
    expect((fast.Put as grpc.MethodDefinition<unknown, unknown>).requestSerialize).toBe((kv.Put as grpc.MethodDefinition<unknown, unknown>).requestSerialize);
    const cluster = serviceDefinition('etcdserverpb.Cluster');
    expect(withFastCodecs('etcdserverpb.Cluster', cluster)).toBe(cluster);
    const lease = serviceDefinition('etcdserverpb.Lease');
    expect(withFastCodecs('etcdserverpb.Lease', lease).LeaseGrant).toBe(lease.LeaseGrant);
  });
});

describe('raft entry payload (InternalRaftRequest)', () => {
  it('encodes KV requests to protobufjs 8 bytes and decodes them to its objects', () => {
    const g = new Gen(rng(42));
    for (let i = 0; i < ROUNDS; i++) {
      const req = g.internalRequest();
      const fast = encodeInternalFast(req);
      expect(fast).not.toBeNull();
      const slow = encodeMessage('etcdserverpb.InternalRaftRequest', req as never);
      expect(fast!.equals(slow)).toBe(true);
      expect(encodeInternalRequest(req as never).equals(slow)).toBe(true);
      const decodedFast = decodeInternalFast(slow);
      expect(decodedFast).not.toBeNull();
      expectSameObject(decodedFast, decodeMessage('etcdserverpb.InternalRaftRequest', slow));
      expectSameObject(decodeInternalRequest(slow), decodeMessage('etcdserverpb.InternalRaftRequest', slow));
    }
  });

  it('reads entries written with explicit zero fields (an older encoder) and by other field orders', () => {
    const g = new Gen(rng(7));
    for (let i = 0; i < 100; i++) {
      const put = g.putRequest();
      // proto-loader's protobufjs 7 keeps zero fields: splice its PutRequest bytes into field 4.
      const putBytes = method('etcdserverpb.KV', 'Put').requestSerialize(put);
      const header = encodeMessage('etcdserverpb.RequestHeader', { ID: g.int64(true), username: 'u', authRevision: '0' });
      // Header (field 100) first, then the put: any order is valid protobuf.
      const bytes = Buffer.concat([Buffer.from([0xa2, 0x06]), varint(header.length), header, Buffer.from([0x22]), varint(putBytes.length), putBytes]);
      expectSameObject(decodeInternalRequest(bytes), decodeMessage('etcdserverpb.InternalRaftRequest', bytes));
    }
  });

  it('leaves other requests to protobufjs, with the same results', () => {
    const reqs = [
      { header: { ID: '9' }, leaseGrant: { ID: '7587869934263396352', TTL: '10' } },
      { header: { ID: '10' }, alarm: { action: 1, memberID: '18446744073709551615', alarm: 1 } },
      { header: { ID: '11' }, authUserAdd: { name: 'u', password: 'p', options: { noPassword: false } } },
      { header: { ID: '12' }, clusterMemberAttrSet: { member_ID: '5', memberAttributes: { name: 'n', clientUrls: ['http://a'] } } },
    ];
    for (const req of reqs) {
      expect(encodeInternalFast(req)).toBeNull();
      const bytes = encodeInternalRequest(req as never);
      expect(bytes.equals(encodeMessage('etcdserverpb.InternalRaftRequest', req as never))).toBe(true);
      expect(decodeInternalFast(bytes)).toBeNull();
      expectSameObject(decodeInternalRequest(bytes), decodeMessage('etcdserverpb.InternalRaftRequest', bytes));
    }
  });

  it('decodes a payload held in a plain Uint8Array', () => {
    const bytes = encodeInternalRequest({ header: { ID: '1', username: '', authRevision: '0' }, put: { key: Buffer.from('k'), value: Buffer.from('v') } } as never);
    const u8 = new Uint8Array(bytes);
    const got = decodeInternalRequest(u8);
    expect(Buffer.isBuffer(got.put?.key)).toBe(true);
    expect(got.put?.value).toEqual(Buffer.from('v'));
  });
});

describe('wire Reader', () => {
  it('reads uint64 up to 2^64-1 and int64 negatives', () => {
    const enc = (name: MessageName, o: object): Buffer => encodeMessage(name, o as never);
    for (const v of ['1', '300', '9007199254740993', MAX_U64.toString()]) {
      const b = enc('etcdserverpb.RequestHeader', { ID: v });
      const r = new Reader(b);
      expect(r.varint()).toBe(0x08);
      expect(r.uint64String()).toBe(v);
    }
    const b = enc('mvccpb.KeyValue', { lease: '-2' });
    const r = new Reader(b);
    r.varint();
    expect(r.int64String()).toBe('-2');
  });

  it('converts decimals to 64-bit varints and back exactly, wrapping like Long beyond 64 bits', () => {
    const g = new Gen(rng(99));
    const values: bigint[] = [0n, 1n, 127n, 128n, 2n ** 32n - 1n, 2n ** 32n, 2n ** 53n - 1n, 2n ** 53n, 2n ** 53n + 1n, MAX_I64, MAX_I64 + 1n, MAX_U64, -1n, -(2n ** 63n)];
    for (let i = 0; i < 2000; i++) values.push(g.bool() ? g.big(MAX_U64) : -g.big(MAX_I64) - 1n);
    for (const v of values) {
      const x = int64Wire(v.toString());
      const w = new Writer(Buffer.alloc(int64Size(x)));
      w.int64(x);
      const bytes = w.done();
      expect(new Reader(bytes).uint64String()).toBe(BigInt.asUintN(64, v).toString());
      expect(new Reader(bytes).int64String()).toBe(BigInt.asIntN(64, v).toString());
      if (v >= -(2n ** 53n) && v < 2n ** 53n) {
        const fromNumber = int64Wire(Number(v));
        const w2 = new Writer(Buffer.alloc(int64Size(fromNumber)));
        w2.int64(fromNumber);
        expect(w2.done().equals(bytes)).toBe(true);
      }
    }
    // Past 2^64 the value wraps (as Long.fromString does in protobufjs).
    for (const over of [(MAX_U64 + 6n).toString(), '99999999999999999999', '1234567890123456789012345', '-00000000000000000000000042']) {
      const enc = encodeMessage('etcdserverpb.RequestHeader', { ID: over } as never);
      const x = int64Wire(over);
      const w = new Writer(Buffer.alloc(1 + int64Size(x)));
      w.byte(0x08);
      w.int64(x);
      expect(w.done().equals(enc)).toBe(true);
    }
  });
});
