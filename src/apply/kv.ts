// KV request semantics on top of the MVCC store (etcd's apply.go / txn package): Range,
// Put, DeleteRange, Txn and Compaction. Responses carry a header with the revision only;
// the server fills cluster/member IDs and term of the outermost one.
//
// Every request is checked completely before its first write, so a rejected request leaves
// nothing behind (the write txn is shared by the whole apply batch and cannot be rolled back).
import { etcdError } from '../errors';
import type { MvccStore, RangeReader, WriteTxn } from '../mvcc/store';
import { toRangeEnd } from '../mvcc/store';
import type * as pb from '../pb/types';
import { applyCompares } from './kv_compare';
import { buf, int64ToBigInt, int64ToNumber, revHeader, toPbKv } from './kv_convert';
import { applyRange } from './kv_range';

export { applyRange, applyRangeForWire, applyRangeForWireInSteps } from './kv_range';

/** What the KV applier needs from the lessor. */
export interface LeaseAttacher {
  exists(id: bigint): boolean;
  attach(id: bigint, key: Buffer): void;
  detach(id: bigint, key: Buffer): void;
  /** The lease holding `key` now, 0n when none (etcd's GetLease). */
  leaseOf(key: Buffer): bigint;
}

/** The API layer rejects these before Raft; checked again so a raw entry cannot slip past. */
function checkPutFlags(req: pb.PutRequest): void {
  if (buf(req.key).length === 0) throw etcdError('EmptyKey');
  if (req.ignoreValue && buf(req.value).length !== 0) throw etcdError('ValueProvided');
  if (req.ignoreLease && int64ToBigInt(req.lease) !== 0n) throw etcdError('LeaseProvided');
}

export function applyPut(txn: WriteTxn, leases: LeaseAttacher, req: pb.PutRequest): pb.PutResponse {
  checkPutFlags(req);
  const key = buf(req.key);
  let lease = int64ToBigInt(req.lease);
  if (lease !== 0n && !leases.exists(lease)) throw etcdError('LeaseNotFound');
  let value = buf(req.value);
  if (req.ignoreValue || req.ignoreLease) {
    const prev = txn.range(key, null).kvs[0];
    if (!prev) throw etcdError('KeyNotFound');
    if (req.ignoreValue) value = prev.value;
    if (req.ignoreLease) lease = prev.lease;
  }
  return doPut(txn, leases, key, value, lease, req.prevKv);
}

function doPut(txn: WriteTxn, leases: LeaseAttacher, key: Buffer, value: Buffer, lease: bigint, wantPrev: boolean): pb.PutResponse {
  const { prevKv } = txn.put(key, value, lease, wantPrev);
  // As etcd's put: the lease the key had is the lessor's to say, so the previous value is read
  // only for a client that asked for it.
  const held = leases.leaseOf(key);
  if (held !== 0n) leases.detach(held, key);
  if (lease !== 0n) leases.attach(lease, key);
  return { header: revHeader(txn.rev), prevKv: wantPrev && prevKv ? toPbKv(prevKv) : null };
}

export function applyDeleteRange(txn: WriteTxn, leases: LeaseAttacher, req: pb.DeleteRangeRequest): pb.DeleteRangeResponse {
  const { deleted, prevKvs } = txn.deleteRange(buf(req.key), buf(req.rangeEnd));
  for (const kv of prevKvs) if (kv.lease !== 0n) leases.detach(kv.lease, kv.key);
  return {
    header: revHeader(txn.rev),
    deleted: String(deleted),
    prevKvs: req.prevKv ? prevKvs.map(toPbKv) : [],
  };
}

export function applyCompaction(store: MvccStore, req: pb.CompactionRequest): { resp: pb.CompactionResponse; done: Promise<void> } {
  const { done } = store.compact(int64ToNumber(req.revision));
  return { resp: { header: revHeader(store.currentRevision()) }, done };
}

// ---- Txn ----

/** Which branch each txn took, decided up front against the state before the txn (as etcd). */
interface TxnPath {
  succeeded: boolean;
  /** One entry per nested txn op of the chosen branch, in order. */
  nested: TxnPath[];
}

function opsOf(req: pb.TxnRequest, succeeded: boolean): pb.RequestOp[] {
  return (succeeded ? req.success : req.failure) ?? [];
}

function compareToPath(reader: RangeReader, req: pb.TxnRequest): TxnPath {
  const succeeded = applyCompares(reader, req.compare ?? []);
  const nested: TxnPath[] = [];
  for (const op of opsOf(req, succeeded)) {
    if (op.requestTxn) nested.push(compareToPath(reader, op.requestTxn));
  }
  return { succeeded, nested };
}

function isTxnReadOnly(req: pb.TxnRequest): boolean {
  for (const op of [...(req.success ?? []), ...(req.failure ?? [])]) {
    if (op.requestPut || op.requestDeleteRange) return false;
    if (op.requestTxn && !isTxnReadOnly(op.requestTxn)) return false;
  }
  return true;
}

/**
 * The writes of the chosen path so far, to answer "does this key exist at this point of the
 * txn" during the checks (a put with ignore_value after a delete of the same key must fail
 * cleanly, not halfway through the writes).
 */
type Effect = { put: string } | { del: string; end: string | null };

function keyExistsAfter(store: MvccStore, effects: Effect[], key: Buffer): boolean {
  const k = key.toString('latin1');
  for (let i = effects.length - 1; i >= 0; i--) {
    const e = effects[i];
    if ('put' in e) {
      if (e.put === k) return true;
    } else if (e.end === null ? e.del === k : k >= e.del && (e.end === '' || k < e.end)) {
      return false;
    }
  }
  return store.range(key, null, { countOnly: true }).count > 0;
}

function checkTxn(store: MvccStore, leases: LeaseAttacher, req: pb.TxnRequest, path: TxnPath, isWrite: boolean, effects: Effect[]): void {
  let nestedIdx = 0;
  for (const op of opsOf(req, path.succeeded)) {
    if (op.requestRange) {
      const rev = int64ToNumber(op.requestRange.revision);
      if (rev !== 0) {
        if (rev > store.currentRevision()) throw etcdError('FutureRev');
        if (rev < store.rawCompactRevision()) throw etcdError('Compacted');
      }
    } else if (op.requestPut) {
      const p = op.requestPut;
      if (!isWrite) continue;
      checkPutFlags(p);
      if (p.ignoreValue || p.ignoreLease) {
        if (!keyExistsAfter(store, effects, buf(p.key))) throw etcdError('KeyNotFound');
      }
      const lease = int64ToBigInt(p.lease);
      if (lease !== 0n && !leases.exists(lease)) throw etcdError('LeaseNotFound');
      effects.push({ put: buf(p.key).toString('latin1') });
    } else if (op.requestDeleteRange) {
      const d = op.requestDeleteRange;
      effects.push({ del: buf(d.key).toString('latin1'), end: toRangeEnd(buf(d.rangeEnd)) });
    } else if (op.requestTxn) {
      checkTxn(store, leases, op.requestTxn, path.nested[nestedIdx++], isWrite, effects);
    }
  }
}

function execTxn(reader: RangeReader, txn: WriteTxn | null, leases: LeaseAttacher, req: pb.TxnRequest, path: TxnPath): pb.TxnResponse {
  const responses: pb.ResponseOp[] = [];
  let nestedIdx = 0;
  for (const op of opsOf(req, path.succeeded)) {
    if (op.requestRange) {
      responses.push({ responseRange: applyRange(reader, op.requestRange), response: 'responseRange' });
    } else if (op.requestPut) {
      if (!txn) throw new Error('put in a read-only txn');
      responses.push({ responsePut: applyPut(txn, leases, op.requestPut), response: 'responsePut' });
    } else if (op.requestDeleteRange) {
      if (!txn) throw new Error('delete in a read-only txn');
      responses.push({ responseDeleteRange: applyDeleteRange(txn, leases, op.requestDeleteRange), response: 'responseDeleteRange' });
    } else if (op.requestTxn) {
      const inner = execTxn(reader, txn, leases, op.requestTxn, path.nested[nestedIdx++]);
      responses.push({ responseTxn: inner, response: 'responseTxn' });
    } else {
      responses.push({});
    }
  }
  // etcd leaves a nested txn's header revision at 0; applyTxn sets the outermost one.
  return { header: revHeader(0), succeeded: path.succeeded, responses };
}

/**
 * Runs a txn: compares (all of them, nested ones too) against the state before the txn,
 * checks the chosen ops, then executes them in ONE write txn (one revision for all writes).
 * A read-only txn reads without opening a write txn (so it may run outside backend.batch()).
 */
export function applyTxn(store: MvccStore, leases: LeaseAttacher, req: pb.TxnRequest): pb.TxnResponse {
  const path = compareToPath(store, req);
  const isWrite = !isTxnReadOnly(req);
  checkTxn(store, leases, req, path, isWrite, []);
  if (!isWrite) {
    const ro = execTxn(store, null, leases, req, path);
    ro.header = revHeader(store.currentRevision());
    return ro;
  }
  const txn = store.write();
  let resp: pb.TxnResponse;
  try {
    resp = execTxn(txn, txn, leases, req, path);
  } finally {
    txn.end();
  }
  // Nested responses carry the revision of their point in the txn; the outer one the final.
  resp.header = revHeader(txn.rev);
  return resp;
}
