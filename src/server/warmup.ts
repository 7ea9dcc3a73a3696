// A fresh process runs its write path in V8's interpreter until each function has run through
// its tier-up budget: measured on a fresh server, the first 32 transactions of 100 puts took
// 220-440 ms where etcd (compiled ahead of time) took 100-300, and the same load on a warm
// server answers in about a third of that. Once the member serves, it runs the code of a write
// (decoding a request, the Raft entry's encoding, apply into the MVCC store, the response's
// encoding) on a scratch store in a temporary directory, then throws the store away. One
// transaction at a time, between which the event loop serves clients: a request that arrives
// meanwhile waits for one step (a few ms), not for the whole warm-up (~200 ms; until 2026-12-03 a
// shorter one ran before the member served).
//
// Nothing of it reaches the member's own state: the scratch backend, lessor, alarms and members
// are its own, and no metric or watcher sees it. It logs only when it cannot run (a warning: the
// member then stays cold until clients have run its code).
import assert from 'node:assert';
import fs from 'node:fs';
import path from 'node:path';
import { Alarms } from '../alarm/alarms';
import { Applier } from '../apply/applier';
import { applyRangeForWireInSteps } from '../apply/kv';
import { Backend } from '../backend/backend';
import { Lessor } from '../lease/lessor';
import type { Logger } from '../log';
import { Members } from '../membership/members';
import { MvccStore } from '../mvcc/store';
import { decodeInternalRequest, encodeInternalRequest } from '../pb/internal';
import {
  decodePutRequest,
  decodeRangeRequest,
  decodeTxnRequest,
  encodePutRequest,
  encodePutResponse,
  encodeRangeRequest,
  encodeRangeResponse,
  encodeTxnRequest,
  encodeTxnResponse,
} from '../pb/kv_wire';
import type * as pb from '../pb/types';
import { nextTurn } from '../runtime/next_turn';

export interface WarmUpOptions {
  /** Where the scratch store's directory is made (and removed). */
  tmpDir: string;
  /** Transactions of `putsPerTxn` puts each; the keys are written twice (creates, then overwrites). */
  txns: number;
  putsPerTxn: number;
  valueBytes: number;
  log: Logger;
  /** Stops the warm-up between two steps (the member is shutting down); it then returns null. */
  signal?: AbortSignal;
}

/**
 * Up to the bound: a fresh member's first burst (large-store's first 32 transactions of 100 puts,
 * sent together) is answered faster the more of the code V8 has optimized by then. 5 alternating
 * fresh starts each (session 32), the load's p99 per transaction with 2040 warm-up puts 157-217 ms
 * (median 173), with 5050 144-186 (168), with 9999 131-158 (152); the warm-up took 79 and 184 ms of
 * the start's first idle turns; an idle member (35 s after its start) is 80-82 MiB against 77-79
 * (70-71 without a warm-up).
 */
export const WARM_UP_DEFAULTS = { txns: 99, putsPerTxn: 100, valueBytes: 256 } as const;
/** Bounds: the warm-up delays the first request it is meant to speed up. */
const MAX_WARM_UP_PUTS = 10_000;

export interface WarmUpResult {
  puts: number;
  ms: number;
}

/** Keys in scattered order (a prime stride), as clients write them: inserts land inside the index's nodes, not at its end. */
const KEY_STRIDE = 7919;

function warmKey(i: number): Buffer {
  return Buffer.from(`/warm-up/${String(i).padStart(6, '0')}`);
}

/**
 * Runs the write path on a scratch store; returns what it did, or null when it could not (then
 * the server starts cold, and says why in a warning).
 */
export async function warmUpWritePath(opts: WarmUpOptions): Promise<WarmUpResult | null> {
  const puts = opts.txns * (opts.putsPerTxn + 1);
  assert(Number.isSafeInteger(puts) && puts >= 0 && puts <= MAX_WARM_UP_PUTS, `warm-up of ${puts} puts is out of bounds`);
  if (puts === 0) return { puts: 0, ms: 0 };
  const startMs = performance.now();
  let dir: string | null = null;
  let backend: Backend | null = null;
  try {
    removeStaleScratch(opts.tmpDir, opts.log);
    dir = fs.mkdtempSync(path.join(opts.tmpDir, `${SCRATCH_PREFIX}${process.pid}-`));
    // Scratch data, removed after: its commits need no fsync (the event loop serves clients meanwhile).
    backend = Backend.open(path.join(dir, 'db'), { batchIntervalMs: 100, flushIntervalMs: 0, unsafeNoFsync: true });
    const written = await writeOnScratch(backend, opts);
    if (written === null) return null;
    assert(written === puts, `warm-up wrote ${written} keys, meant ${puts}`);
    return { puts, ms: performance.now() - startMs };
  } catch (e) {
    // The member's own state was never touched: it starts, only colder.
    opts.log.warn('skipped the warm-up of the write path', { error: String(e) });
    return null;
  } finally {
    try {
      if (backend) await backend.close();
      if (dir) fs.rmSync(dir, { recursive: true, force: true });
    } catch (e) {
      opts.log.warn('failed to remove the warm-up store', { path: dir ?? '', error: String(e) });
    }
  }
}

const SCRATCH_PREFIX = 'etcd-ts-warm-up-';
const SCRATCH_NAME = /^etcd-ts-warm-up-(\d+)-/;
/** Stale scratch directories removed per start (a member killed during its warm-up leaves one). */
const MAX_STALE_REMOVED = 16;

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Scratch directories of processes that are gone: a member killed while it warmed up. */
function removeStaleScratch(tmpDir: string, log: Logger): void {
  let removed = 0;
  for (const name of fs.readdirSync(tmpDir)) {
    if (removed >= MAX_STALE_REMOVED) return;
    const m = SCRATCH_NAME.exec(name);
    if (!m) continue;
    const pid = Number(m[1]);
    if (pid === process.pid || processAlive(pid)) continue;
    fs.rmSync(path.join(tmpDir, name), { recursive: true, force: true });
    removed++;
    log.debug('removed the warm-up store of a process that is gone', { path: path.join(tmpDir, name) });
  }
}

/**
 * Transactions of puts, single puts and one-key reads, as clients send them, one transaction per
 * turn of the event loop; returns the puts applied (events seen), or null once `signal` aborts.
 */
async function writeOnScratch(backend: Backend, opts: WarmUpOptions): Promise<number | null> {
  const mvcc = new MvccStore(backend);
  let events = 0;
  mvcc.onEvents((evs) => {
    events += evs.length;
  });
  const lessor = new Lessor({ db: backend.subDb('lease'), nowMs: () => Date.now(), minTtlSec: 1 });
  const alarms = new Alarms(backend.subDb('alarm'));
  const members = new Members(backend.subDb('members'), backend.subDb('members_removed'));
  const applier = new Applier({ backend, mvcc, lessor, alarms, members, log: opts.log });
  const value = Buffer.alloc(opts.valueBytes, 0x77);
  let index = 0;
  /** As a committed entry: through the Raft entry's encoding, then applied in a batch with its index. */
  const apply = (request: pb.InternalRaftRequest): unknown => {
    index += 1;
    request.header = { ID: String(index), username: '', authRevision: '0' };
    const req = decodeInternalRequest(encodeInternalRequest(request));
    let resp: unknown;
    backend.batch(() => {
      const r = applier.apply(req, index);
      if (r.err) throw r.err;
      resp = r.resp;
      backend.setConsistentIndex(index);
    });
    return resp;
  };
  const header = (): pb.ResponseHeader => ({ clusterId: '1', memberId: '1', revision: String(mvcc.currentRevision()), raftTerm: '1' });
  // Half as many keys as puts: the second half overwrites (a previous version, a longer key history).
  const keys = Math.max(1, Math.floor((opts.txns * opts.putsPerTxn) / 2));
  for (let t = 0; t < opts.txns; t++) {
    await nextTurn();
    if (opts.signal?.aborted) return null;
    const success: pb.RequestOp[] = [];
    for (let j = 0; j < opts.putsPerTxn; j++) {
      success.push({ requestPut: { key: warmKey(((t * opts.putsPerTxn + j) * KEY_STRIDE) % keys), value } } as pb.RequestOp);
    }
    const txn = decodeTxnRequest(encodeTxnRequest({ compare: [], success, failure: [] }));
    const txnResp = apply({ txn } as pb.InternalRaftRequest) as pb.TxnResponse;
    txnResp.header = header();
    encodeTxnResponse(txnResp);

    const put = decodePutRequest(encodePutRequest({ key: warmKey(t % keys), value }));
    const putResp = apply({ put } as pb.InternalRaftRequest) as pb.PutResponse;
    putResp.header = header();
    encodePutResponse(putResp);

    const range = decodeRangeRequest(encodeRangeRequest({ key: warmKey(t % keys) }));
    // The KV service's own path (a one-key range takes no step).
    const rangeResp = await applyRangeForWireInSteps(mvcc, range);
    if (rangeResp.kvs.length !== 1) assert.fail(`warm-up read ${rangeResp.kvs.length} keys of one`);
    rangeResp.header = header();
    encodeRangeResponse(rangeResp);
  }
  return events;
}
