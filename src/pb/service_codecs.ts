// Server-side codecs of the hot RPCs: the KV and lease keepalive requests are decoded and the KV,
// watch, keepalive and snapshot responses encoded by hand (kv_wire.ts, lease_wire.ts) instead of
// protobufjs's fromObject+encode / decode+toObject.
// Same objects in, same objects out; the bytes are the canonical proto3 encoding (zero scalars
// omitted, as etcd's own encoder does). Whatever the hand-written code does not handle falls
// back to the method's protobufjs codec (src/pb/load.ts) for that message.
import type * as grpc from '@grpc/grpc-js';
import {
  decodeDeleteRangeRequest,
  decodePutRequest,
  decodeRangeRequest,
  decodeTxnRequest,
  encodeDeleteRangeResponse,
  encodePutResponse,
  encodeRangeResponse,
  encodeTxnResponse,
  rangeResponseParts,
  encodeWatchResponse,
} from './kv_wire';
import { decodeLeaseKeepAliveRequest, encodeLeaseKeepAliveResponse } from './lease_wire';
import { encodeSnapshotResponse } from './snapshot_wire';
import { NotFast, type EncodedParts, type PartsSerializer } from './wire';

type Decode = (buf: Buffer) => unknown;
type Encode = (obj: never) => Buffer;

interface FastMethod {
  decode?: Decode;
  encode?: Encode;
  /** The encoding as parts, when it has them (see PartsSerializer). */
  parts?: (obj: never) => EncodedParts | null;
}

const FAST: Record<string, Record<string, FastMethod>> = {
  'etcdserverpb.KV': {
    Range: { decode: decodeRangeRequest, encode: encodeRangeResponse, parts: rangeResponseParts },
    Put: { decode: decodePutRequest, encode: encodePutResponse },
    DeleteRange: { decode: decodeDeleteRangeRequest, encode: encodeDeleteRangeResponse },
    Txn: { decode: decodeTxnRequest, encode: encodeTxnResponse },
  },
  'etcdserverpb.Watch': {
    Watch: { encode: encodeWatchResponse },
  },
  'etcdserverpb.Lease': {
    LeaseKeepAlive: { decode: decodeLeaseKeepAliveRequest, encode: encodeLeaseKeepAliveResponse },
  },
  'etcdserverpb.Maintenance': {
    Snapshot: { encode: encodeSnapshotResponse },
  },
};

function withFallbackDecode(fast: Decode, slow: (buf: Buffer) => unknown): (buf: Buffer) => unknown {
  return (buf) => {
    try {
      return fast(buf);
    } catch (e) {
      if (e instanceof NotFast) return slow(buf);
      throw e;
    }
  };
}

function withFallbackEncode(fast: Encode, slow: (v: unknown) => Buffer, parts?: (obj: never) => EncodedParts | null): PartsSerializer {
  const serialize: PartsSerializer = (v) => {
    try {
      return fast(v as never);
    } catch (e) {
      if (e instanceof NotFast) return slow(v);
      throw e;
    }
  };
  if (parts !== undefined) {
    // Input the hand-written code is not sure about is serialized whole (and falls back there).
    serialize.parts = (v) => {
      try {
        return parts(v as never);
      } catch (e) {
        if (e instanceof NotFast) return null;
        throw e;
      }
    };
  }
  return serialize;
}

/**
 * A copy of a service definition whose hot methods use the hand-written codecs (server side:
 * request decoding and response encoding; the client-side functions are left as they are).
 */
export function withFastCodecs(serviceName: string, def: grpc.ServiceDefinition): grpc.ServiceDefinition {
  const fast = FAST[serviceName];
  if (fast === undefined) return def;
  const out: Record<string, grpc.MethodDefinition<unknown, unknown>> = {};
  for (const [name, m] of Object.entries(def as Record<string, grpc.MethodDefinition<unknown, unknown>>)) {
    const f = fast[name];
    if (f === undefined) {
      out[name] = m;
      continue;
    }
    out[name] = {
      ...m,
      requestDeserialize: f.decode ? withFallbackDecode(f.decode, m.requestDeserialize) : m.requestDeserialize,
      responseSerialize: f.encode ? withFallbackEncode(f.encode, m.responseSerialize, f.parts) : m.responseSerialize,
    };
  }
  return out as grpc.ServiceDefinition;
}
