// Server-side codecs of the hot RPCs: the KV and lease keepalive requests are decoded and the KV,
// watch and keepalive responses encoded by hand (kv_wire.ts, lease_wire.ts) instead of
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
  encodeWatchResponse,
} from './kv_wire';
import { decodeLeaseKeepAliveRequest, encodeLeaseKeepAliveResponse } from './lease_wire';
import { NotFast } from './wire';

type Decode = (buf: Buffer) => unknown;
type Encode = (obj: never) => Buffer;

interface FastMethod {
  decode?: Decode;
  encode?: Encode;
}

const FAST: Record<string, Record<string, FastMethod>> = {
  'etcdserverpb.KV': {
    Range: { decode: decodeRangeRequest, encode: encodeRangeResponse },
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

function withFallbackEncode(fast: Encode, slow: (v: unknown) => Buffer): (v: unknown) => Buffer {
  return (v) => {
    try {
      return fast(v as never);
    } catch (e) {
      if (e instanceof NotFast) return slow(v);
      throw e;
    }
  };
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
      responseSerialize: f.encode ? withFallbackEncode(f.encode, m.responseSerialize) : m.responseSerialize,
    };
  }
  return out as grpc.ServiceDefinition;
}
