// The gRPC service of proto/peer/peer.proto. Stream batches are framed by codec.ts and
// travel as raw bytes (no intermediate objects); the small envelope messages use protobufjs.
import path from 'node:path';
import type * as grpc from '@grpc/grpc-js';
import * as protobuf from 'protobufjs';
import { protoDir } from '../pb/load';

export const METADATA_CLUSTER_ID = 'x-etcd-cluster-id';
export const METADATA_FROM = 'x-server-from';
export const METADATA_TO = 'x-raft-to';

const SERVICE = 'peerpb.Peer';
export const STREAM_PATH = `/${SERVICE}/Stream`;
export const SNAPSHOT_PATH = `/${SERVICE}/Snapshot`;
export const MEMBER_INFO_PATH = `/${SERVICE}/MemberInfo`;
export const LEASE_RENEW_PATH = `/${SERVICE}/LeaseRenew`;
export const LEASE_TIME_TO_LIVE_PATH = `/${SERVICE}/LeaseTimeToLive`;

export const EMPTY = Buffer.alloc(0);
export const identity = (b: Buffer): Buffer => b;

let cachedRoot: protobuf.Root | undefined;
function root(): protobuf.Root {
  if (cachedRoot === undefined) {
    const dir = protoDir();
    const r = new protobuf.Root();
    r.resolvePath = (_origin: string, target: string) => path.join(dir, target);
    r.loadSync('peer/peer.proto', { keepCase: false });
    r.resolveAll();
    cachedRoot = r;
  }
  return cachedRoot;
}

function type(name: string): protobuf.Type {
  return root().lookupType(name);
}

function toBuffer(u: Uint8Array): Buffer {
  return Buffer.from(u.buffer, u.byteOffset, u.byteLength);
}

export interface ChunkMsg {
  /** Set on the first chunk only. */
  totalBytes: number | null;
  data: Buffer;
}

export function encodeChunk(c: ChunkMsg): Buffer {
  const t = type('peerpb.Chunk');
  const obj: Record<string, unknown> = { data: c.data };
  if (c.totalBytes !== null) obj.totalBytes = c.totalBytes;
  return toBuffer(t.encode(t.fromObject(obj)).finish());
}

export function decodeChunk(buf: Buffer): ChunkMsg {
  const t = type('peerpb.Chunk');
  const o = t.toObject(t.decode(buf), { longs: Number, defaults: false }) as { totalBytes?: number; data?: Uint8Array };
  return { totalBytes: o.totalBytes ?? null, data: o.data === undefined ? EMPTY : toBuffer(o.data) };
}

export interface MemberInfo {
  clusterId: bigint;
  memberId: bigint;
  membersJson: string;
}

export function encodeMemberInfo(info: MemberInfo): Buffer {
  const t = type('peerpb.MemberInfoResponse');
  return toBuffer(
    t.encode(
      t.fromObject({ clusterId: info.clusterId.toString(), memberId: info.memberId.toString(), membersJson: info.membersJson }),
    ).finish(),
  );
}

export function decodeMemberInfo(buf: Buffer): MemberInfo {
  const t = type('peerpb.MemberInfoResponse');
  const o = t.toObject(t.decode(buf), { longs: String, defaults: true }) as { clusterId: string; memberId: string; membersJson: string };
  return { clusterId: BigInt(o.clusterId), memberId: BigInt(o.memberId), membersJson: o.membersJson };
}

/** A forwarded lease call's request: the lease ID (int64, as a decimal string). */
export function encodeLeaseId(name: 'peerpb.LeaseRenewRequest' | 'peerpb.LeaseTimeToLiveRequest', id: string): Buffer {
  const t = type(name);
  return toBuffer(t.encode(t.fromObject({ id })).finish());
}

export function decodeLeaseId(name: 'peerpb.LeaseRenewRequest' | 'peerpb.LeaseTimeToLiveRequest', buf: Buffer): string {
  const t = type(name);
  return (t.toObject(t.decode(buf), { longs: String, defaults: true }) as { id: string }).id;
}

export interface LeaseTtl {
  /** Seconds left: -1 for a lease the leader does not hold (a renewal answers 0 for it instead). */
  ttl: string;
  /** The TTL it was granted with (time-to-live only). */
  grantedTtl: string;
}

export function encodeLeaseRenewResponse(ttl: string): Buffer {
  const t = type('peerpb.LeaseRenewResponse');
  return toBuffer(t.encode(t.fromObject({ ttl })).finish());
}

export function decodeLeaseRenewResponse(buf: Buffer): string {
  const t = type('peerpb.LeaseRenewResponse');
  return (t.toObject(t.decode(buf), { longs: String, defaults: true }) as { ttl: string }).ttl;
}

export function encodeLeaseTimeToLiveResponse(r: LeaseTtl): Buffer {
  const t = type('peerpb.LeaseTimeToLiveResponse');
  return toBuffer(t.encode(t.fromObject({ ttl: r.ttl, grantedTtl: r.grantedTtl })).finish());
}

export function decodeLeaseTimeToLiveResponse(buf: Buffer): LeaseTtl {
  const t = type('peerpb.LeaseTimeToLiveResponse');
  return t.toObject(t.decode(buf), { longs: String, defaults: true }) as LeaseTtl;
}

function method(path: string, requestStream: boolean, responseStream: boolean): grpc.MethodDefinition<Buffer, Buffer> {
  return {
    path,
    requestStream,
    responseStream,
    requestSerialize: identity,
    requestDeserialize: identity,
    responseSerialize: identity,
    responseDeserialize: identity,
  };
}

/** The service definition; handlers and clients exchange raw protobuf bytes. */
export const PEER_SERVICE: grpc.ServiceDefinition = {
  Stream: method(STREAM_PATH, true, true),
  Snapshot: method(SNAPSHOT_PATH, true, false),
  MemberInfo: method(MEMBER_INFO_PATH, false, false),
  LeaseRenew: method(LEASE_RENEW_PATH, false, false),
  LeaseTimeToLive: method(LEASE_TIME_TO_LIVE_PATH, false, false),
};
