// Member and cluster IDs computed exactly as etcd does, so the same flags give the same IDs
// as a real etcd member would have (tools and operators compare them).
import { createHash } from 'node:crypto';

/** etcd: sha1(concat(sorted peer URLs) + cluster token [+ unix seconds]); first 8 bytes, big-endian. */
export function computeMemberId(peerUrls: string[], clusterToken: string, nowSec?: number): bigint {
  const sorted = [...peerUrls].sort();
  let s = sorted.join('') + clusterToken;
  if (nowSec !== undefined) s += String(nowSec);
  const digest = createHash('sha1').update(s).digest();
  return digest.readBigUInt64BE(0);
}

/** etcd: sha1 over the big-endian member IDs in ascending order; first 8 bytes. */
export function computeClusterId(memberIds: bigint[]): bigint {
  const sorted = [...memberIds].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  const b = Buffer.alloc(8 * sorted.length);
  sorted.forEach((id, i) => b.writeBigUInt64BE(id, 8 * i));
  return createHash('sha1').update(b).digest().readBigUInt64BE(0);
}

/** IDs as etcd prints them in logs and etcdctl output: lowercase hex without padding. */
export function idToHex(id: bigint): string {
  return id.toString(16);
}
