// Differential test: one scripted request sequence, sent with grpc-js (etcd's proto from the etcd3
// npm package) to the real etcd (3.6 by default; DIFF_REFERENCE=3.7 or a path to a binary picks
// another, see referenceBin) and to the server under test, each started fresh with the same limits.
// Responses (or gRPC code + message) are normalised and compared step by step.
//
// With ETCD_BIN=/var/cache/etcd-ts-reference/3.6/bin/etcd both sides are the real etcd: that run
// checks the sequence itself is deterministic and the normalisation sufficient.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EtcdMember, etcdBin, startEtcd } from '../helpers/etcd-process';
import { referenceBin } from '../helpers/differential';
import { EtcdGrpc, isRpcError, Msg, ServiceName, StreamReader } from '../helpers/grpc';
import { lineDiff, normalize, NormalizeContext } from '../helpers/normalize';
import { sleepMs } from '../helpers/wait';

const REFERENCE_BIN = referenceBin();
const DEADLINE_EXCEEDED = 4;
const CALL_DEADLINE_MS = 5_000;
const MAX_REQUEST_BYTES = 16 * 1024;
const MAX_TXN_OPS = 8;
const LIMIT_FLAGS = [`--max-request-bytes=${MAX_REQUEST_BYTES}`, `--max-txn-ops=${MAX_TXN_OPS}`];

/**
 * Steps where we deliberately differ from the reference (etcd 3.6). `compare` projects a
 * normalised outcome onto the part that must still be equal; the full difference is printed.
 */
interface AllowedDifference {
  why: string;
  compare: (outcome: unknown) => unknown;
}
// None against etcd 3.6.17. Against 3.4.23 (DIFF_REFERENCE=/usr/bin/etcd) 'alarm list' differs:
// 3.4 sends AlarmResponse without a header, 3.5+ fills it.
const ALLOWED_DIFFERENCES: Record<string, AllowedDifference> = {};

type Outcome = { ok: unknown } | { err: { code: number; details: string } };

class Runner {
  readonly client: EtcdGrpc;
  /** IDs of granted leases, in grant order (so steps can refer to "lease 0"). */
  readonly leaseIds: string[] = [];

  constructor(readonly member: EtcdMember) {
    this.client = new EtcdGrpc(member.clientHostPort);
  }

  async call(service: ServiceName, method: string, req: Msg): Promise<Outcome> {
    try {
      const res = await this.client.unary(service, method, req, CALL_DEADLINE_MS);
      if (method === 'LeaseGrant') this.leaseIds.push(String(res['ID']));
      return { ok: res };
    } catch (e) {
      if (isRpcError(e)) return { err: { code: e.code, details: e.details } };
      throw e;
    }
  }

  lease(n: number): string {
    const id = this.leaseIds[n];
    if (id === undefined) throw new Error(`no lease #${n} granted yet`);
    return id;
  }

  /**
   * Open a watch stream, send `requests`, run `afterFirst` once the first response arrives,
   * and collect responses until `expectMsgs` arrived, then a short quiet period for extras.
   * With several watchers on one stream the interleaving between watchers is not defined, so
   * responses are ordered by watch ID (keeping each watcher's own order).
   */
  async watch(
    requests: Msg[],
    expectMsgs: number,
    afterFirst?: (write: (m: Msg) => void) => Promise<unknown>,
  ): Promise<Outcome> {
    const stream = this.client.bidi('Watch', 'Watch', 15_000);
    const reader = new StreamReader(stream, 1_000);
    const msgs: Msg[] = [];
    try {
      for (const r of requests) stream.write(r);
      const sideEffects: unknown[] = [];
      while (msgs.length < expectMsgs) {
        msgs.push(await reader.next(5_000));
        if (msgs.length === 1 && afterFirst) sideEffects.push(await afterFirst((m) => stream.write(m)));
      }
      // Anything more than expected is a difference too.
      await sleepMs(150);
      while (reader.pending() > 0) msgs.push(await reader.next(100));
      const byWatcher = msgs.map((m, i) => ({ m, i })).sort((a, b) => Number(a.m['watch_id']) - Number(b.m['watch_id']) || a.i - b.i);
      return { ok: { responses: byWatcher.map((x) => x.m), sideEffects } };
    } catch (e) {
      return { err: { code: -1, details: `watch: ${(e as Error).message}; got ${JSON.stringify(msgs)}` } };
    } finally {
      stream.cancel();
    }
  }

  /** One LeaseKeepAlive round trip. */
  async keepAlive(id: string): Promise<Outcome> {
    const stream = this.client.bidi('Lease', 'LeaseKeepAlive', 10_000);
    const reader = new StreamReader(stream, 10);
    try {
      stream.write({ ID: id });
      return { ok: await reader.next(5_000) };
    } catch (e) {
      if (isRpcError(e)) return { err: { code: e.code, details: e.details } };
      return { err: { code: -1, details: (e as Error).message } };
    } finally {
      stream.cancel();
    }
  }

  close(): void {
    this.client.close();
  }
}

interface Step {
  name: string;
  run: (r: Runner) => Promise<Outcome>;
}

// Enums go as numbers: the etcd3 package's proto renames etcd's enum values (Equal, not EQUAL).
const SORT = { NONE: 0, ASCEND: 1, DESCEND: 2 } as const;
const SORT_BY = { KEY: 0, VERSION: 1, CREATE: 2, MOD: 3, VALUE: 4 } as const;
const CMP_RESULT = { EQUAL: 0, GREATER: 1, LESS: 2, NOT_EQUAL: 3 } as const;
const CMP_TARGET = { VERSION: 0, CREATE: 1, MOD: 2, VALUE: 3, LEASE: 4 } as const;
const FILTER_NOPUT = 0;
const ALARM_GET = 0;

const B = (s: string): Buffer => Buffer.from(s);
const put = (key: string, value: string, extra: Msg = {}): Msg => ({ key: B(key), value: B(value), ...extra });
const rangeReq = (key: string, extra: Msg = {}): Msg => ({ key: B(key), ...extra });
const prefixEnd = (p: string): Buffer => {
  const b = B(p);
  b[b.length - 1]!++;
  return b;
};
type Target = 'VERSION' | 'CREATE' | 'MOD' | 'VALUE' | 'LEASE';
type Result = 'EQUAL' | 'GREATER' | 'LESS' | 'NOT_EQUAL';
function cmp(key: string, target: Target, result: Result, v: string | number, extra: Msg = {}): Msg {
  const field = { VERSION: 'version', CREATE: 'create_revision', MOD: 'mod_revision', VALUE: 'value', LEASE: 'lease' }[target];
  return { key: B(key), target: CMP_TARGET[target], result: CMP_RESULT[result], [field]: target === 'VALUE' ? B(String(v)) : String(v), ...extra };
}
const opPut = (key: string, value: string, extra: Msg = {}): Msg => ({ request_put: put(key, value, extra) });
const opRange = (key: string, extra: Msg = {}): Msg => ({ request_range: rangeReq(key, extra) });
const opDel = (key: string, extra: Msg = {}): Msg => ({ request_delete_range: { key: B(key), ...extra } });
const opTxn = (compare: Msg[], success: Msg[], failure: Msg[]): Msg => ({ request_txn: { compare, success, failure } });

const kv = (method: string, req: Msg | ((r: Runner) => Msg)) => (r: Runner) =>
  r.call('KV', method, typeof req === 'function' ? req(r) : req);
const lease = (method: string, req: Msg | ((r: Runner) => Msg)) => (r: Runner) =>
  r.call('Lease', method, typeof req === 'function' ? req(r) : req);
const watchCreate = (create: Msg): Msg => ({ create_request: create });

// Revisions below are those of a fresh store (revision 1) following this exact sequence.
const STEPS: Step[] = [
  { name: 'range on an empty store', run: kv('Range', rangeReq('a')) },
  { name: 'put a', run: kv('Put', put('a', '1')) },
  { name: 'put b with prev_kv (none)', run: kv('Put', put('b', '2', { prev_kv: true })) },
  { name: 'put b again with prev_kv', run: kv('Put', put('b', '3', { prev_kv: true })) },
  { name: 'put c', run: kv('Put', put('c', 'x')) },
  { name: 'put d', run: kv('Put', put('d', 'y')) },
  { name: 'put e/1', run: kv('Put', put('e/1', 'v1')) },
  { name: 'put e/2', run: kv('Put', put('e/2', 'v2')) },
  { name: 'put e/3', run: kv('Put', put('e/3', 'v0')) },
  { name: 'put e/2 again', run: kv('Put', put('e/2', 'v9')) },
  { name: 'range one key', run: kv('Range', rangeReq('a')) },
  { name: 'range [a, d)', run: kv('Range', rangeReq('a', { range_end: B('d') })) },
  { name: 'range prefix e/', run: kv('Range', rangeReq('e/', { range_end: prefixEnd('e/') })) },
  { name: 'range from key c', run: kv('Range', rangeReq('c', { range_end: B('\0') })) },
  { name: 'range everything', run: kv('Range', rangeReq('\0', { range_end: B('\0') })) },
  { name: 'range limit 2 (more, count)', run: kv('Range', rangeReq('\0', { range_end: B('\0'), limit: 2 })) },
  { name: 'range at revision 3', run: kv('Range', rangeReq('a', { range_end: B('z'), revision: 3 })) },
  { name: 'range sort key descend', run: kv('Range', rangeReq('\0', { range_end: B('\0'), sort_order: SORT.DESCEND, sort_target: SORT_BY.KEY })) },
  { name: 'range sort version ascend', run: kv('Range', rangeReq('\0', { range_end: B('\0'), sort_order: SORT.ASCEND, sort_target: SORT_BY.VERSION })) },
  { name: 'range sort create descend', run: kv('Range', rangeReq('\0', { range_end: B('\0'), sort_order: SORT.DESCEND, sort_target: SORT_BY.CREATE })) },
  { name: 'range sort mod ascend limit 3', run: kv('Range', rangeReq('\0', { range_end: B('\0'), sort_order: SORT.ASCEND, sort_target: SORT_BY.MOD, limit: 3 })) },
  { name: 'range sort value descend', run: kv('Range', rangeReq('e/', { range_end: prefixEnd('e/'), sort_order: SORT.DESCEND, sort_target: SORT_BY.VALUE })) },
  { name: 'range sort target value, order none', run: kv('Range', rangeReq('e/', { range_end: prefixEnd('e/'), sort_order: SORT.NONE, sort_target: SORT_BY.VALUE })) },
  { name: 'range keys_only', run: kv('Range', rangeReq('e/', { range_end: prefixEnd('e/'), keys_only: true })) },
  { name: 'range keys_only sorted by value', run: kv('Range', rangeReq('e/', { range_end: prefixEnd('e/'), keys_only: true, sort_order: SORT.DESCEND, sort_target: SORT_BY.VALUE })) },
  { name: 'range count_only', run: kv('Range', rangeReq('e/', { range_end: prefixEnd('e/'), count_only: true })) },
  { name: 'range serializable', run: kv('Range', rangeReq('b', { serializable: true })) },
  { name: 'range min/max mod revision', run: kv('Range', rangeReq('\0', { range_end: B('\0'), min_mod_revision: 4, max_mod_revision: 8 })) },
  { name: 'range min/max create revision', run: kv('Range', rangeReq('\0', { range_end: B('\0'), min_create_revision: 3, max_create_revision: 7 })) },
  { name: 'range missing key', run: kv('Range', rangeReq('nothing')) },
  { name: 'delete a with prev_kv', run: kv('DeleteRange', { key: B('a'), prev_kv: true }) },
  { name: 'delete a missing key', run: kv('DeleteRange', { key: B('a') }) },
  { name: 'delete prefix e/ with prev_kv', run: kv('DeleteRange', { key: B('e/'), range_end: prefixEnd('e/'), prev_kv: true }) },
  { name: 'recreate e/1 (version restarts)', run: kv('Put', put('e/1', 'again')) },
  { name: 'range e/1 after recreate', run: kv('Range', rangeReq('e/1')) },
  {
    name: 'txn success: value compare, put + range',
    run: kv('Txn', { compare: [cmp('b', 'VALUE', 'EQUAL', '3')], success: [opPut('b', '4'), opRange('b')], failure: [opPut('f', 'no')] }),
  },
  {
    name: 'txn failure: version compare, put + delete',
    run: kv('Txn', { compare: [cmp('b', 'VERSION', 'GREATER', 10)], success: [opPut('b', 'no')], failure: [opPut('f', '1'), opDel('c', { prev_kv: true })] }),
  },
  {
    name: 'txn create/mod compares with LESS and NOT_EQUAL',
    run: kv('Txn', { compare: [cmp('b', 'CREATE', 'LESS', 4), cmp('b', 'MOD', 'NOT_EQUAL', 1)], success: [opRange('b')], failure: [] }),
  },
  { name: 'txn compare on a missing key (version 0)', run: kv('Txn', { compare: [cmp('missing', 'VERSION', 'EQUAL', 0)], success: [opPut('g', 'created')], failure: [] }) },
  { name: 'txn compare value on a missing key fails', run: kv('Txn', { compare: [cmp('missing', 'VALUE', 'EQUAL', '')], success: [opPut('g', 'no')], failure: [opRange('g')] }) },
  {
    name: 'txn compare over a range',
    run: kv('Txn', { compare: [cmp('a', 'VERSION', 'GREATER', 0, { range_end: B('h') })], success: [opPut('h', 'all')], failure: [opPut('h', 'some')] }),
  },
  {
    name: 'txn nested',
    run: kv('Txn', {
      compare: [cmp('b', 'VALUE', 'EQUAL', '4')],
      success: [opTxn([cmp('d', 'VALUE', 'EQUAL', 'y')], [opPut('n/1', 'inner'), opRange('d')], [opPut('n/1', 'inner-fail')]), opPut('n/2', 'outer')],
      failure: [],
    }),
  },
  {
    name: 'txn nested failing inner compare',
    run: kv('Txn', { compare: [], success: [opTxn([cmp('d', 'VALUE', 'EQUAL', 'nope')], [opPut('n/3', 'x')], [opDel('n/', { range_end: prefixEnd('n/') })])], failure: [] }),
  },
  { name: 'txn empty', run: kv('Txn', { compare: [], success: [], failure: [] }) },
  { name: 'txn range + delete range', run: kv('Txn', { compare: [], success: [opRange('\0', { range_end: B('\0'), keys_only: true }), opDel('g', { prev_kv: true })], failure: [] }) },
  { name: 'txn duplicate put key', run: kv('Txn', { compare: [], success: [opPut('dup', '1'), opPut('dup', '2')], failure: [] }) },
  { name: 'txn put inside a deleted range', run: kv('Txn', { compare: [], success: [opDel('a', { range_end: B('c') }), opPut('b', 'x')], failure: [] }) },
  {
    name: 'txn duplicate across nesting',
    run: kv('Txn', { compare: [], success: [opPut('dup', '1'), opTxn([], [opPut('dup', '2')], [])], failure: [] }),
  },
  {
    name: 'txn same key in success and failure is fine',
    run: kv('Txn', { compare: [cmp('b', 'VALUE', 'EQUAL', '4')], success: [opPut('s', 'then')], failure: [opPut('s', 'else')] }),
  },
  {
    name: 'txn too many ops',
    run: kv('Txn', { compare: [], success: Array.from({ length: MAX_TXN_OPS + 1 }, (_, i) => opPut(`many/${i}`, 'v')), failure: [] }),
  },
  {
    name: 'txn at the ops limit',
    run: kv('Txn', { compare: [], success: Array.from({ length: MAX_TXN_OPS }, (_, i) => opPut(`many/${i}`, 'v')), failure: [] }),
  },
  { name: 'put empty key', run: kv('Put', put('', 'v')) },
  { name: 'range empty key', run: kv('Range', rangeReq('')) },
  { name: 'delete empty key', run: kv('DeleteRange', { key: B('') }) },
  { name: 'txn with an empty key put', run: kv('Txn', { compare: [], success: [opPut('', 'v')], failure: [] }) },
  { name: 'put ignore_value on a missing key', run: kv('Put', { key: B('nokey'), ignore_value: true }) },
  { name: 'put ignore_value with a value', run: kv('Put', put('b', 'v', { ignore_value: true })) },
  { name: 'put ignore_value on an existing key', run: kv('Put', { key: B('b'), ignore_value: true, prev_kv: true }) },
  { name: 'put ignore_lease on a missing key', run: kv('Put', put('nokey', 'v', { ignore_lease: true })) },
  { name: 'range a future revision', run: kv('Range', rangeReq('b', { revision: 1000 })) },
  { name: 'put over max-request-bytes', run: kv('Put', put('big', 'x'.repeat(MAX_REQUEST_BYTES + 4_000))) },
  { name: 'put under max-request-bytes', run: kv('Put', put('big', 'x'.repeat(MAX_REQUEST_BYTES - 1_500))) },
  { name: 'lease grant 60s (server-chosen ID)', run: lease('LeaseGrant', { TTL: 60 }) },
  { name: 'lease grant 30s with ID 7777', run: lease('LeaseGrant', { TTL: 30, ID: 7777 }) },
  { name: 'lease grant an existing ID', run: lease('LeaseGrant', { TTL: 30, ID: 7777 }) },
  { name: 'lease grant a too large TTL', run: lease('LeaseGrant', { TTL: '9000000001' }) },
  { name: 'put ignore_lease with a lease', run: kv('Put', (r) => put('b', 'v', { ignore_lease: true, lease: r.lease(0) })) },
  { name: 'lease grant 20s with ID 8888', run: lease('LeaseGrant', { TTL: 20, ID: 8888 }) },
  // Keys only go to leases with client-chosen IDs: a server-chosen ID inside a stored key would
  // make the key history, and so HashKV, differ between any two servers.
  { name: 'put l/1 with lease 8888', run: kv('Put', put('l/1', 'a', { lease: 8888 })) },
  { name: 'put l/2 with lease 8888', run: kv('Put', put('l/2', 'b', { lease: 8888 })) },
  { name: 'put l/3 with lease 7777', run: kv('Put', put('l/3', 'c', { lease: 7777 })) },
  { name: 'put with an unknown lease', run: kv('Put', put('l/4', 'd', { lease: 123456789 })) },
  { name: 'range l/ shows leases', run: kv('Range', rangeReq('l/', { range_end: prefixEnd('l/') })) },
  { name: 'lease time-to-live with keys', run: lease('LeaseTimeToLive', { ID: 8888, keys: true }) },
  { name: 'lease time-to-live without keys', run: lease('LeaseTimeToLive', (r) => ({ ID: r.lease(0) })) },
  { name: 'lease time-to-live of an unknown lease', run: lease('LeaseTimeToLive', { ID: 424242 }) },
  { name: 'lease list', run: lease('LeaseLeases', {}) },
  { name: 'lease keep-alive', run: (r) => r.keepAlive(r.lease(0)) },
  { name: 'lease keep-alive of an unknown lease', run: (r) => r.keepAlive('424242') },
  { name: 'lease revoke', run: lease('LeaseRevoke', { ID: 8888 }) },
  { name: 'lease revoke the server-chosen lease', run: lease('LeaseRevoke', (r) => ({ ID: r.lease(0) })) },
  { name: 'range l/ after revoke', run: kv('Range', rangeReq('l/', { range_end: prefixEnd('l/') })) },
  { name: 'lease revoke again', run: lease('LeaseRevoke', { ID: 8888 }) },
  { name: 'put ignore_lease keeps the lease', run: kv('Put', put('l/3', 'c2', { ignore_lease: true, prev_kv: true })) },
  { name: 'txn compare on lease', run: kv('Txn', { compare: [cmp('l/3', 'LEASE', 'EQUAL', 7777)], success: [opRange('l/3')], failure: [] }) },
  { name: 'watch replay of b from revision 2', run: (r) => r.watch([watchCreate({ key: B('b'), start_revision: 2 })], 2) },
  { name: 'watch replay of prefix e/ with prev_kv', run: (r) => r.watch([watchCreate({ key: B('e/'), range_end: prefixEnd('e/'), start_revision: 1, prev_kv: true })], 2) },
  { name: 'watch replay with NOPUT filter', run: (r) => r.watch([watchCreate({ key: B('\0'), range_end: B('\0'), start_revision: 1, filters: [FILTER_NOPUT] })], 2) },
  {
    name: 'watch live put after create',
    run: (r) => r.watch([watchCreate({ key: B('live'), prev_kv: true })], 2, () => r.call('KV', 'Put', put('live', '1'))),
  },
  {
    name: 'watch cancel',
    run: (r) => r.watch([watchCreate({ key: B('live') })], 2, async (write) => write({ cancel_request: { watch_id: 0 } })),
  },
  {
    name: 'watch progress request',
    run: (r) => r.watch([watchCreate({ key: B('b') })], 2, async (write) => write({ progress_request: {} })),
  },
  {
    name: 'watch two watchers on one stream',
    run: (r) => r.watch([watchCreate({ key: B('b'), start_revision: 3 }), watchCreate({ key: B('d'), start_revision: 6 })], 4),
  },
  { name: 'hash kv', run: (r) => r.call('Maintenance', 'HashKV', { revision: 0 }) },
  { name: 'compact at revision 20', run: kv('Compact', { revision: 20, physical: true }) },
  { name: 'range below the compacted revision', run: kv('Range', rangeReq('b', { revision: 19 })) },
  { name: 'range at the compacted revision', run: kv('Range', rangeReq('b', { revision: 20 })) },
  { name: 'compact an older revision', run: kv('Compact', { revision: 10 }) },
  { name: 'compact a future revision', run: kv('Compact', { revision: 100000 }) },
  { name: 'watch from a compacted revision', run: (r) => r.watch([watchCreate({ key: B('b'), start_revision: 5 })], 2) },
  { name: 'hash kv after compaction', run: (r) => r.call('Maintenance', 'HashKV', { revision: 0 }) },
  // The hash etcd's compaction kept (hashStorage): compact_revision is the one before, none here.
  { name: 'hash kv at the compacted revision', run: (r) => r.call('Maintenance', 'HashKV', { revision: 20 }) },
  { name: 'status', run: (r) => r.call('Maintenance', 'Status', {}) },
  { name: 'member list', run: (r) => r.call('Cluster', 'MemberList', {}) },
  { name: 'alarm list', run: (r) => r.call('Maintenance', 'Alarm', { action: ALARM_GET }) },
  { name: 'defragment', run: (r) => r.call('Maintenance', 'Defragment', {}) },
  { name: 'lease grant with a negative ID', run: lease('LeaseGrant', { TTL: 40, ID: -9 }) },
  { name: 'put l/5 with the negative lease', run: kv('Put', put('l/5', 'neg', { lease: -9 })) },
  { name: 'txn compare lease LESS 0', run: kv('Txn', { compare: [cmp('l/5', 'LEASE', 'LESS', 0)], success: [opRange('l/5')], failure: [] }) },
  { name: 'lease time-to-live of the negative lease', run: lease('LeaseTimeToLive', { ID: -9, keys: true }) },
  { name: 'lease revoke the negative lease', run: lease('LeaseRevoke', { ID: -9 }) },
  { name: 'final range of everything', run: kv('Range', rangeReq('\0', { range_end: B('\0') })) },
];

async function runSequence(member: EtcdMember): Promise<unknown[]> {
  const runner = new Runner(member);
  const ctx: NormalizeContext = {
    leases: new Map(),
    clientPort: Number(new URL(member.clientUrl).port),
    peerPort: Number(new URL(member.peerUrl).port),
  };
  try {
    const out: unknown[] = [];
    let timeoutsInARow = 0;
    for (const step of STEPS) {
      let outcome: Outcome;
      if (timeoutsInARow >= 3) {
        // A hung server would otherwise cost a deadline per remaining step.
        outcome = { err: { code: -1, details: 'not sent: the server stopped answering' } };
      } else {
        try {
          outcome = await step.run(runner);
        } catch (e) {
          outcome = { err: { code: -1, details: `step threw: ${(e as Error).message}` } };
        }
      }
      const deadline = 'err' in outcome && outcome.err.code === DEADLINE_EXCEEDED;
      timeoutsInARow = deadline ? timeoutsInARow + 1 : 0;
      out.push(normalize(outcome, ctx));
    }
    return out;
  } finally {
    runner.close();
  }
}

let reference: EtcdMember | undefined;
let subject: EtcdMember | undefined;
afterAll(async () => {
  await reference?.stop();
  await subject?.stop();
});

describe('differential: real etcd vs the server under test', () => {
  let refOut: unknown[] = [];
  let subjOut: unknown[] = [];

  beforeAll(async () => {
    // One after the other: both are fresh, and a slow start of one cannot skew the other's timing.
    reference = await startEtcd({ bin: REFERENCE_BIN, args: LIMIT_FLAGS });
    refOut = await runSequence(reference);
    await reference.stop();
    subject = await startEtcd({ bin: etcdBin(), args: LIMIT_FLAGS });
    subjOut = await runSequence(subject);
    // DIFF_DUMP_DIR=/some/dir keeps both normalised transcripts for a closer look.
    const dumpDir = process.env['DIFF_DUMP_DIR'];
    if (dumpDir) {
      const dump = (out: unknown[]): string => JSON.stringify(out.map((o, i) => ({ step: STEPS[i]?.name, ...(o as object) })), null, 2);
      fs.mkdirSync(dumpDir, { recursive: true });
      fs.writeFileSync(path.join(dumpDir, 'etcd.json'), dump(refOut));
      fs.writeFileSync(path.join(dumpDir, 'subject.json'), dump(subjOut));
    }
  }, 120_000);

  it(`sends ${STEPS.length} requests`, () => {
    expect(STEPS.length).toBeGreaterThanOrEqual(60);
    expect(new Set(STEPS.map((s) => s.name)).size).toBe(STEPS.length);
    for (const name of Object.keys(ALLOWED_DIFFERENCES)) expect(STEPS.map((s) => s.name)).toContain(name);
  });

  it('gets the same response (or the same error) at every step', () => {
    const failures: string[] = [];
    const tolerated: string[] = [];
    STEPS.forEach((step, i) => {
      const a = JSON.stringify(refOut[i], null, 2);
      const b = JSON.stringify(subjOut[i], null, 2);
      if (a === b) return;
      const report = `#${i + 1} ${step.name}\n${lineDiff(a, b)}`;
      const allowed = ALLOWED_DIFFERENCES[step.name];
      const stillSame =
        allowed !== undefined && JSON.stringify(allowed.compare(refOut[i])) === JSON.stringify(allowed.compare(subjOut[i]));
      if (stillSame) tolerated.push(`${report}\n(allowed: ${allowed.why})`);
      else failures.push(report);
    });
    if (tolerated.length > 0) console.log(`allowed differences ('-' etcd, '+' ours):\n\n${tolerated.join('\n\n')}`);
    // Once one step differs, later steps usually differ in revisions too: show the first few in full.
    const shown = failures.slice(0, 8).join('\n\n');
    const more = failures.length > 8 ? `\n\n... and ${failures.length - 8} more differing steps: ${failures.slice(8).map((f) => f.split('\n')[0]).join('; ')}` : '';
    expect(failures.length, `${failures.length} of ${STEPS.length} steps differ ('-' etcd ${REFERENCE_BIN}, '+' ${etcdBin()}):\n\n${shown}${more}`).toBe(0);
  });
});
