// The fuzz targets: each parser of untrusted bytes, with the errors it may throw on bad input.
// Anything else it throws, a disagreement between our hand-written decoders and protobufjs, or a
// bound it breaks is a finding (see engine.ts).
import assert from 'node:assert';
import { isDeepStrictEqual } from 'node:util';
import type * as grpc from '@grpc/grpc-js';
import { ConnectionError, FrameSplitter, HeaderBlockCollector, type FrameSink } from '../../src/h2/frame_reader';
import { FrameType, frame } from '../../src/h2/frames';
import { encodeHeaders, HpackDecoder, HpackError } from '../../src/h2/hpack';
import { serviceDefinition } from '../../src/pb/load';
import { withFastCodecs } from '../../src/pb/service_codecs';
import { encodePutRequest, encodeRangeRequest, encodeTxnRequest } from '../../src/pb/kv_wire';
import { decodeBatch, decodeRaftMessage, encodeRaftMessage } from '../../src/transport/codec';
import { WireError } from '../../src/transport/message_wire';
import { MessageType } from '../../src/raft';
import { decodeEntry, decodeHardState, decodeSnapshotMeta, encodeEntry } from '../../src/wal/codec';
import { readRecord, RECORD_HEADER_BYTES, RecordType, sealRecord } from '../../src/wal/record';
import type { FuzzTarget } from './engine';

/** Errors a decoder of garbage may throw: its own kinds, and the plain ones protobufjs and Buffer reads throw. */
function decodeError(e: unknown): boolean {
  return e instanceof HpackError || e instanceof ConnectionError || e instanceof WireError || (e instanceof Error && (e.constructor === Error || e.constructor === RangeError));
}

const REQUEST_HEADERS = [
  encodeHeaders({ ':method': 'POST', ':scheme': 'http', ':path': '/etcdserverpb.KV/Range', ':authority': '127.0.0.1:2379', 'content-type': 'application/grpc', te: 'trailers' }),
  encodeHeaders({ ':method': 'GET', ':scheme': 'https', ':path': '/health', ':authority': 'x', 'user-agent': 'curl/8', token: 'abc.def' }),
];

const hpack: FuzzTarget = {
  name: 'hpack',
  seeds: REQUEST_HEADERS,
  maxInputBytes: 4096,
  coverage: ['/src/h2/hpack', '/src/h2/huffman'],
  run(input) {
    const d = new HpackDecoder();
    try {
      // Twice: the second block decodes against the table the first one left.
      for (let i = 0; i < 2; i++) {
        const fields = d.decode(input);
        // Every field takes at least one byte of the block.
        if (fields.length / 2 > input.length) throw new Error(`${fields.length / 2} fields from ${input.length} bytes`);
      }
    } catch (e) {
      if (!decodeError(e)) throw e;
    }
  },
};

const h2Frames: FuzzTarget = {
  name: 'h2-frames',
  seeds: [
    Buffer.concat([
      frame(FrameType.SETTINGS, 0, 0, Buffer.alloc(0)),
      frame(FrameType.HEADERS, 0x4, 1, REQUEST_HEADERS[0]!),
      frame(FrameType.DATA, 0x1, 1, Buffer.from([0, 0, 0, 0, 3, 0x0a, 0x01, 0x61])),
    ]),
    Buffer.concat([frame(FrameType.HEADERS, 0x8, 3, Buffer.concat([Buffer.from([2]), REQUEST_HEADERS[1]!, Buffer.alloc(2)])), frame(FrameType.CONTINUATION, 0x4, 3, Buffer.alloc(0))]),
  ],
  maxInputBytes: 64 * 1024,
  coverage: ['/src/h2/frame_reader', '/src/h2/hpack', '/src/h2/huffman'],
  run(input) {
    const blocks = new HeaderBlockCollector();
    const hpackDecoder = new HpackDecoder();
    const sink: FrameSink = {
      receiveFrame(type, flags, streamId, payload) {
        if (type === FrameType.HEADERS) {
          if (blocks.open) throw new ConnectionError(1, 'HEADERS inside a header block');
          const b = blocks.headers(flags, streamId, payload);
          if (b) hpackDecoder.decode(b.block);
        } else if (type === FrameType.CONTINUATION) {
          const b = blocks.continuation(flags, streamId, payload);
          if (b) hpackDecoder.decode(b.block);
        }
        return true;
      },
    };
    const splitter = new FrameSplitter(sink);
    try {
      // Fed in pieces whose sizes the input's first byte picks: splitting must not matter.
      const step = 1 + (input[0] ?? 0) * 7;
      for (let at = 0; at < input.length; at += step) splitter.feed(input.subarray(at, at + step));
    } catch (e) {
      if (!decodeError(e)) throw e;
    }
  },
};

type Method = { service: string; method: string };
const KV_METHODS: Method[] = [
  { service: 'etcdserverpb.KV', method: 'Range' },
  { service: 'etcdserverpb.KV', method: 'Put' },
  { service: 'etcdserverpb.KV', method: 'DeleteRange' },
  { service: 'etcdserverpb.KV', method: 'Txn' },
  { service: 'etcdserverpb.Lease', method: 'LeaseKeepAlive' },
];

let codecs: Array<{ fast: (b: Buffer) => unknown; slow: (b: Buffer) => unknown }> | null = null;
function requestCodecs(): NonNullable<typeof codecs> {
  if (codecs === null) {
    codecs = KV_METHODS.map(({ service, method }) => {
      const slowDef = serviceDefinition(service) as Record<string, grpc.MethodDefinition<unknown, unknown>>;
      const fastDef = withFastCodecs(service, serviceDefinition(service)) as Record<string, grpc.MethodDefinition<unknown, unknown>>;
      return { fast: fastDef[method]!.requestDeserialize, slow: slowDef[method]!.requestDeserialize };
    });
  }
  return codecs;
}

function outcome(decode: (b: Buffer) => unknown, input: Buffer): { ok: true; value: unknown } | { ok: false; error: unknown } {
  try {
    return { ok: true, value: decode(input) };
  } catch (e) {
    return { ok: false, error: e };
  }
}

/** Plain data for comparing: Buffers and Uint8Arrays alike as hex. */
function plain(v: unknown): unknown {
  if (v instanceof Uint8Array) return `bytes:${Buffer.from(v).toString('hex')}`;
  if (Array.isArray(v)) return v.map(plain);
  if (v !== null && typeof v === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v)) out[k] = plain(x);
    return out;
  }
  return v;
}

const kvRequests: FuzzTarget = {
  name: 'kv-request-codecs',
  // The first byte picks the method; the rest is the message.
  seeds: [
    Buffer.concat([Buffer.from([0]), encodeRangeRequest({ key: Buffer.from('a'), range_end: Buffer.from('b'), limit: '10', revision: '3', serializable: true })]),
    Buffer.concat([Buffer.from([1]), encodePutRequest({ key: Buffer.from('k'), value: Buffer.from('v'), lease: '7', prev_kv: true })]),
    Buffer.concat([
      Buffer.from([3]),
      encodeTxnRequest({
        compare: [{ result: 0, target: 0, key: Buffer.from('k'), version: '1' }],
        success: [{ request_put: { key: Buffer.from('k'), value: Buffer.from('v') } }],
        failure: [{ request_range: { key: Buffer.from('k') } }],
      }),
    ]),
    Buffer.from([4, 0x08, 0x96, 0x01]),
  ],
  maxInputBytes: 4096,
  coverage: ['/src/pb/kv_wire', '/src/pb/lease_wire', '/src/pb/wire', '/src/pb/service_codecs'],
  run(input) {
    if (input.length === 0) return;
    const c = requestCodecs()[input[0]! % KV_METHODS.length]!;
    const body = input.subarray(1);
    const fast = outcome(c.fast, body);
    const slow = outcome(c.slow, body);
    if (fast.ok !== slow.ok) {
      throw new Error(`${KV_METHODS[input[0]! % KV_METHODS.length]!.method}: ours ${fast.ok ? 'decoded' : `threw ${String((fast as { error: unknown }).error)}`}, protobufjs ${slow.ok ? 'decoded' : `threw ${String((slow as { error: unknown }).error)}`}`);
    }
    if (fast.ok && slow.ok && !isDeepStrictEqual(plain(fast.value), plain(slow.value))) {
      throw new Error(`${KV_METHODS[input[0]! % KV_METHODS.length]!.method}: ours and protobufjs decode differently: ${JSON.stringify(plain(fast.value))} vs ${JSON.stringify(plain(slow.value))}`);
    }
    if (!fast.ok && !decodeError((fast as { error: unknown }).error)) throw (fast as { error: unknown }).error;
  },
};

const raftMessages: FuzzTarget = {
  name: 'raft-messages',
  seeds: [
    encodeRaftMessage({
      type: MessageType.MsgApp,
      to: 2n,
      from: 1n,
      term: 3,
      logTerm: 2,
      index: 10,
      entries: [{ term: 3, index: 11, type: 0, data: Buffer.from('x') }],
      commit: 10,
      reject: false,
      rejectHint: 0,
      snapshot: null,
      context: Buffer.alloc(0),
    }),
  ],
  maxInputBytes: 8192,
  coverage: ['/src/transport/codec', '/src/transport/message_wire'],
  run(input) {
    try {
      decodeRaftMessage(input);
    } catch (e) {
      if (!decodeError(e)) throw e;
    }
    try {
      decodeBatch(input);
    } catch (e) {
      if (!decodeError(e)) throw e;
    }
  },
};

function walSeed(): Buffer {
  const payload = encodeEntry({ term: 1, index: 1, type: 0, data: Buffer.from('entry') });
  const buf = Buffer.alloc(RECORD_HEADER_BYTES + payload.length);
  payload.copy(buf, RECORD_HEADER_BYTES);
  sealRecord(buf, 0, RecordType.Entry, payload.length);
  return buf;
}

const walRecords: FuzzTarget = {
  name: 'wal-records',
  seeds: [walSeed()],
  maxInputBytes: 8192,
  coverage: ['/src/wal/record', '/src/wal/codec'],
  run(input) {
    let at = 0;
    for (let n = 0; n < 1000; n++) {
      const r = readRecord(input, at);
      if (r === null) return;
      assert(r.end > at, 'a record that does not advance');
      try {
        if (r.type === 2) decodeEntry(r.payload);
        else if (r.type === 3) decodeHardState(r.payload);
        else if (r.type === 4) decodeSnapshotMeta(r.payload);
      } catch (e) {
        if (!decodeError(e)) throw e;
      }
      at = r.end;
    }
  },
};

export const TARGETS: readonly FuzzTarget[] = [hpack, h2Frames, kvRequests, raftMessages, walRecords];

/**
 * Not a parser: proof that the guidance works (random bytes alone would need ~2^32 tries). A
 * 4-byte magic behind four nested checks, each reachable only from an input that passed the one
 * before; the run must find it (`--targets=planted`, expecting exit status 1).
 */
export const PLANTED: FuzzTarget = {
  name: 'planted',
  seeds: [Buffer.from('zzzz')],
  maxInputBytes: 16,
  coverage: ['/scripts/fuzz/targets'],
  run(input) {
    if (input[0] === 0x46) {
      if (input[1] === 0x55) {
        if (input[2] === 0x5a) {
          if (input[3] === 0x5a) throw new TypeError('planted bug found');
        }
      }
    }
  },
};
