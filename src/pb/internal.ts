// Binary codec for messages we store ourselves (the raft entry payload, raft messages,
// records in the backend). Uses protobufjs directly on the same .proto files and converts
// with the same options as the gRPC loader, so a decoded payload has exactly the shapes of
// src/pb/types.ts (and of what the API received from the client).
import assert from 'node:assert';
import * as protobuf from 'protobufjs';
import { CONVERSION, protoRoot } from './load';
import { decodeInternalFast, encodeInternalFast } from './internal_wire';
import type { InternalRaftRequest, MessageByName, MessageInit, MessageName } from './types';
import { NotFast } from './wire';

const typeCache = new Map<string, protobuf.Type>();

/** The protobufjs reflection type of a message, by full proto name ("mvccpb.KeyValue"). */
export function messageType(fullName: MessageName): protobuf.Type {
  let t = typeCache.get(fullName);
  if (t === undefined) {
    t = protoRoot().lookupType(fullName);
    typeCache.set(fullName, t);
  }
  return t;
}

function asBuffer(bytes: Uint8Array): Buffer {
  return Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/**
 * Encode a message given as a plain object in the proto-loader shape. Missing fields encode
 * as defaults; int64 may be a decimal string or a safe integer number.
 */
export function encodeMessage<N extends MessageName>(name: N, obj: MessageInit<MessageByName[N]>): Buffer {
  const t = messageType(name);
  return asBuffer(t.encode(t.fromObject(obj as Record<string, unknown>)).finish());
}

/** Decode bytes into the proto-loader shape (defaults filled, int64 as strings, bytes as Buffer). */
export function decodeMessage<N extends MessageName>(name: N, buf: Uint8Array): MessageByName[N] {
  const t = messageType(name);
  return t.toObject(t.decode(buf), CONVERSION) as MessageByName[N];
}

/** Serialize the raft entry payload. The request must carry exactly one operation. */
export function encodeInternalRequest(req: MessageInit<InternalRaftRequest>): Buffer {
  assert(req.ID !== undefined || req.header != null, 'InternalRaftRequest needs an ID or header.ID');
  // KV requests (nearly every entry) have a hand-written encoder; it yields protobufjs's bytes.
  try {
    const fast = encodeInternalFast(req as Record<string, unknown>);
    if (fast !== null) return fast;
  } catch (e) {
    if (!(e instanceof NotFast)) throw e;
  }
  return encodeMessage('etcdserverpb.InternalRaftRequest', req);
}

/** Parse a raft entry payload written by encodeInternalRequest (or by etcd). */
export function decodeInternalRequest(buf: Uint8Array): InternalRaftRequest {
  try {
    const fast = decodeInternalFast(asBuffer(buf));
    if (fast !== null) return fast;
  } catch (e) {
    if (!(e instanceof NotFast)) throw e;
  }
  return decodeMessage('etcdserverpb.InternalRaftRequest', buf);
}

/**
 * A complete message object from a partial one: every missing field gets its proto default
 * (and oneof discriminators are set), exactly as if it had been decoded. Handy for building
 * requests for EtcdServerApi, whose signatures take complete messages.
 */
export function createMessage<N extends MessageName>(name: N, init: MessageInit<MessageByName[N]>): MessageByName[N] {
  const t = messageType(name);
  return t.toObject(t.fromObject(init as Record<string, unknown>), CONVERSION) as MessageByName[N];
}
