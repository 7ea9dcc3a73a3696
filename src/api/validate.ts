// etcd's v3rpc request checks (etcdserver/api/v3rpc/key.go): they run before a request
// reaches the server, and their errors are what clients match on.
import type * as pb from '../pb/types';
import { Code, etcdError } from '../errors';
import { adHocError } from './errors';

const SORT_ORDER_NONE = 0;
const SORT_ORDER_MAX = 2; // DESCEND
const SORT_TARGET_KEY = 0;
const SORT_TARGET_MAX = 4; // VALUE

function isEmpty(b: Buffer | Uint8Array | null | undefined): boolean {
  return b == null || b.length === 0;
}

/**
 * Range checks. etcd only checks the key; an unknown sort order makes etcd skip sorting
 * (we normalize it to NONE/KEY so lower layers see only valid enums), and an unknown
 * sort target makes etcd's sort panic: we reject it instead of crashing.
 */
export function checkRangeRequest(r: pb.RangeRequest): void {
  if (isEmpty(r.key)) throw etcdError('EmptyKey');
  normalizeSort(r);
}

function normalizeSort(r: pb.RangeRequest): void {
  const order = r.sortOrder ?? SORT_ORDER_NONE;
  const target = r.sortTarget ?? SORT_TARGET_KEY;
  if (order < SORT_ORDER_NONE || order > SORT_ORDER_MAX) {
    // etcd: an order other than NONE/ASCEND/DESCEND sorts nothing, whatever the target.
    r.sortOrder = SORT_ORDER_NONE;
    r.sortTarget = SORT_TARGET_KEY;
    return;
  }
  if (target < SORT_TARGET_KEY || target > SORT_TARGET_MAX) {
    throw adHocError(Code.InvalidArgument, 'etcdserver: invalid sort option');
  }
}

export function checkPutRequest(r: pb.PutRequest): void {
  if (isEmpty(r.key)) throw etcdError('EmptyKey');
  if (r.ignoreValue && !isEmpty(r.value)) throw etcdError('ValueProvided');
  if (r.ignoreLease && r.lease != null && String(r.lease) !== '0') throw etcdError('LeaseProvided');
}

export function checkDeleteRequest(r: pb.DeleteRangeRequest): void {
  if (isEmpty(r.key)) throw etcdError('EmptyKey');
}

/** Op counts per branch against maxTxnOps, empty keys, and the nested ops, as etcd. */
export function checkTxnRequest(r: pb.TxnRequest, maxTxnOps: number): void {
  const compare = r.compare ?? [];
  const success = r.success ?? [];
  const failure = r.failure ?? [];
  const opc = Math.max(compare.length, success.length, failure.length);
  if (opc > maxTxnOps) throw etcdError('TooManyOps');
  for (const c of compare) {
    if (isEmpty(c.key)) throw etcdError('EmptyKey');
  }
  // etcd hands nested txns the remaining budget (maxTxnOps - opc), not the full one.
  for (const u of success) checkRequestOp(u, maxTxnOps - opc);
  for (const u of failure) checkRequestOp(u, maxTxnOps - opc);
}

function checkRequestOp(u: pb.RequestOp, maxTxnOps: number): void {
  if (u.requestRange) return checkRangeRequest(u.requestRange);
  if (u.requestPut) return checkPutRequest(u.requestPut);
  if (u.requestDeleteRange) return checkDeleteRequest(u.requestDeleteRange);
  if (u.requestTxn) return checkTxnRequest(u.requestTxn, maxTxnOps);
  throw etcdError('KeyNotFound');
}

// ---- put/delete overlap within one txn (etcd's checkIntervals) ----

/**
 * A half-open byte interval [begin, end) where an empty `end` means +infinity, exactly
 * the "string affine" ordering etcd uses here. A delete with range_end "\0" therefore
 * becomes [key, "\0"), which contains no key: etcd does not flag a put under a
 * from-key delete, and neither do we.
 */
interface Interval {
  begin: Buffer;
  end: Buffer;
}

function affineLess(a: Buffer, b: Buffer): boolean {
  // Empty sorts after everything.
  if (a.length === 0) return false;
  if (b.length === 0) return true;
  return Buffer.compare(a, b) < 0;
}

function containsKey(iv: Interval, key: Buffer): boolean {
  // Point [k, k+"\0") intersects [b, e) iff b < k+"\0" && k < e, i.e. b <= k < e.
  return !affineLess(key, iv.begin) && affineLess(key, iv.end);
}

function pointInterval(key: Buffer): Interval {
  return { begin: key, end: Buffer.concat([key, Buffer.from([0])]) };
}

interface OverlapSets {
  puts: Set<string>;
  dels: Interval[];
}

/** A key as a latin1 string (one char per byte), without copying its bytes first. */
function keyString(key: Buffer | Uint8Array | null | undefined): string {
  if (!key) return '';
  const buf = Buffer.isBuffer(key) ? key : Buffer.from(key.buffer, key.byteOffset, key.byteLength);
  return buf.toString('latin1');
}

/** Throws DuplicateKey when a txn branch writes a key twice or puts a key it deletes. */
export function checkIntervals(reqs: pb.RequestOp[]): OverlapSets {
  const dels: Interval[] = [];
  for (const req of reqs) {
    const d = req.requestDeleteRange;
    if (!d) continue;
    const key = Buffer.from(d.key ?? Buffer.alloc(0));
    dels.push(isEmpty(d.rangeEnd) ? pointInterval(key) : { begin: key, end: Buffer.from(d.rangeEnd) });
  }
  // Most transactions delete nothing: no key is turned back into bytes for them.
  const intersects = (k: string): boolean => {
    if (dels.length === 0) return false;
    const key = Buffer.from(k, 'latin1');
    return dels.some((iv) => containsKey(iv, key));
  };

  const puts = new Set<string>();
  for (const req of reqs) {
    const t = req.requestTxn;
    if (!t) continue;
    const thenSets = checkIntervals(t.success ?? []);
    const elseSets = checkIntervals(t.failure ?? []);
    for (const k of thenSets.puts) {
      if (puts.has(k) || intersects(k)) throw etcdError('DuplicateKey');
      puts.add(k);
    }
    for (const k of elseSets.puts) {
      // then/else exclude each other, so the same key in both is fine.
      if (puts.has(k) && !thenSets.puts.has(k)) throw etcdError('DuplicateKey');
      if (intersects(k)) throw etcdError('DuplicateKey');
      puts.add(k);
    }
    // A child's deletes count against later siblings and this level's puts, as in etcd.
    dels.push(...thenSets.dels, ...elseSets.dels);
  }

  for (const req of reqs) {
    const p = req.requestPut;
    if (!p) continue;
    const k = keyString(p.key);
    if (puts.has(k) || intersects(k)) throw etcdError('DuplicateKey');
    puts.add(k);
  }
  return { puts, dels };
}

// ---- request size (etcd checks the encoded raft proposal against max-request-bytes) ----

function varintLen(n: number): number {
  let len = 1;
  while (n >= 0x80) {
    n = Math.floor(n / 128);
    len++;
  }
  return len;
}

/**
 * What wrapping a request of `wireBytes` adds in the raft proposal (InternalRaftRequest):
 * the header holding the 64-bit request ID (field 100: 2-byte tag, 1-byte length, ID tag
 * plus a 9-byte varint, as etcd's member-prefixed IDs encode) and the request's own 1-byte
 * tag and length. Checked against etcd 3.4.23: a put of key "big" is accepted up to a
 * 1,572,838-byte value at the default 1.5 MiB limit, and so here.
 */
const RAFT_HEADER_BYTES = 2 + 1 + 1 + 9;

export function proposalBytes(wireBytes: number): number {
  return RAFT_HEADER_BYTES + 1 + varintLen(wireBytes) + wireBytes;
}

export function checkRequestSize(wireBytes: number | undefined, maxRequestBytes: number): void {
  if (wireBytes === undefined) return;
  if (proposalBytes(wireBytes) > maxRequestBytes) throw etcdError('RequestTooLarge');
}

/** etcd serves a txn without writes locally (no raft proposal, so no size limit). */
export function isTxnReadOnly(r: pb.TxnRequest): boolean {
  for (const op of [...(r.success ?? []), ...(r.failure ?? [])]) {
    if (op.requestPut || op.requestDeleteRange) return false;
    if (op.requestTxn && !isTxnReadOnly(op.requestTxn)) return false;
  }
  return true;
}
