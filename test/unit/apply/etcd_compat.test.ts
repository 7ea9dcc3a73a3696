// Runs the same requests against the real etcd (when installed) and our KV applier, and
// compares the answers field by field. Skipped when /usr/bin/etcd is absent.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { applyCompaction, applyDeleteRange, applyPut, applyRange, applyTxn } from '../../../src/apply/kv';
import { EtcdError } from '../../../src/errors';
import type * as pb from '../../../src/pb/types';
import { closeStore, openStore } from '../mvcc/helpers';
import { cmp, delReq, FakeLeases, op, putReq, rangeReq, txnReq } from './kv_helpers';

const ETCD = '/usr/bin/etcd';
const haveEtcd = fs.existsSync(ETCD);

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.listen(0, '127.0.0.1', () => {
      const a = srv.address();
      const port = typeof a === 'object' && a ? a.port : 0;
      srv.close(() => resolve(port));
    });
    srv.on('error', reject);
  });
}

type Unary = (req: unknown, cb: (err: grpc.ServiceError | null, resp: unknown) => void) => void;
interface Client {
  kv: Record<'Range' | 'Put' | 'DeleteRange' | 'Txn' | 'Compact', Unary>;
  maint: Record<'HashKV', Unary>;
  lease: Record<'LeaseGrant', Unary>;
}

function call<T>(fn: Unary, req: unknown): Promise<T> {
  return new Promise((resolve, reject) => fn(req, (err, resp) => (err ? reject(err) : resolve(resp as T))));
}

/** Our side: one store + applier. */
const LEASE_ID = 7000n;

function ours() {
  const s = openStore();
  const leases = new FakeLeases([LEASE_ID]);
  const inTxn = <T>(fn: (t: ReturnType<typeof s.store.write>) => T): T =>
    s.backend.batch(() => {
      const t = s.store.write();
      try {
        return fn(t);
      } finally {
        t.end();
      }
    });
  return {
    s,
    Range: (r: pb.RangeRequest) => applyRange(s.store, r),
    Put: (r: pb.PutRequest) => inTxn((t) => applyPut(t, leases, r)),
    DeleteRange: (r: pb.DeleteRangeRequest) => inTxn((t) => applyDeleteRange(t, leases, r)),
    Txn: (r: pb.TxnRequest) => s.backend.batch(() => applyTxn(s.store, leases, r)),
  };
}

/** Drops the header fields only the server fills, so both sides compare alike. */
function strip(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(strip);
  if (Buffer.isBuffer(v)) return v.toString('hex');
  if (v && typeof v === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v)) {
      if (k === 'clusterId' || k === 'memberId' || k === 'raftTerm') continue;
      out[k] = strip(x);
    }
    return out;
  }
  return v;
}

describe('KV semantics equal the real etcd', () => {
  let proc: ChildProcess;
  let client: Client;
  let dir: string;
  const mine = haveEtcd ? ours() : null;

  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'etcd-compat-'));
    const [cport, pport] = [await freePort(), await freePort()];
    proc = spawn(ETCD, [
      '--data-dir', path.join(dir, 'data'),
      '--listen-client-urls', `http://127.0.0.1:${cport}`,
      '--advertise-client-urls', `http://127.0.0.1:${cport}`,
      '--listen-peer-urls', `http://127.0.0.1:${pport}`,
      '--initial-advertise-peer-urls', `http://127.0.0.1:${pport}`,
      '--initial-cluster', `default=http://127.0.0.1:${pport}`,
    ], { stdio: 'ignore' });
    const protoRoot = path.resolve(__dirname, '../../../proto');
    const def = protoLoader.loadSync(path.join(protoRoot, 'etcdserverpb/rpc.proto'), {
      keepCase: false, longs: String, enums: Number, defaults: true, oneofs: true, includeDirs: [protoRoot],
    });
    const pkg = grpc.loadPackageDefinition(def) as unknown as { etcdserverpb: Record<string, new (addr: string, creds: grpc.ChannelCredentials) => unknown> };
    const addr = `127.0.0.1:${cport}`;
    const kv = new pkg.etcdserverpb.KV(addr, grpc.credentials.createInsecure()) as Record<string, Unary>;
    const maint = new pkg.etcdserverpb.Maintenance(addr, grpc.credentials.createInsecure()) as Record<string, Unary>;
    const bind = (c: Record<string, Unary>, names: string[]) => Object.fromEntries(names.map((n) => [n, c[n].bind(c)]));
    const lease = new pkg.etcdserverpb.Lease(addr, grpc.credentials.createInsecure()) as Record<string, Unary>;
    client = {
      kv: bind(kv, ['Range', 'Put', 'DeleteRange', 'Txn', 'Compact']) as Client['kv'],
      maint: bind(maint, ['HashKV']) as Client['maint'],
      lease: bind(lease, ['LeaseGrant']) as Client['lease'],
    };
    // Wait (bounded) until etcd answers.
    const deadline = Date.now() + 20_000;
    for (;;) {
      try {
        await call(client.kv.Range, rangeReq('probe'));
        break;
      } catch (e) {
        if (Date.now() > deadline) throw e;
        await new Promise((r) => setTimeout(r, 100));
      }
    }
  }, 30_000);

  afterAll(async () => {
    if (proc && proc.exitCode === null) {
      const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
      proc.kill('SIGTERM');
      await Promise.race([exited, new Promise((r) => setTimeout(r, 10_000))]);
      if (proc.exitCode === null) proc.kill('SIGKILL');
    }
    if (mine) await closeStore(mine.s);
    fs.rmSync(dir, { recursive: true, force: true });
  });

  async function both<K extends 'Range' | 'Put' | 'DeleteRange' | 'Txn'>(method: K, req: unknown): Promise<{ theirs: unknown; mine: unknown }> {
    let theirs: unknown;
    try {
      theirs = strip(await call(client.kv[method], req));
    } catch (e) {
      theirs = { error: (e as grpc.ServiceError).details, code: (e as grpc.ServiceError).code };
    }
    let m: unknown;
    try {
      m = strip((mine as unknown as Record<K, (r: unknown) => unknown>)[method](req));
    } catch (e) {
      if (!(e instanceof EtcdError)) throw e;
      m = { error: e.message, code: e.code };
    }
    return { theirs, mine: m };
  }

  async function same<K extends 'Range' | 'Put' | 'DeleteRange' | 'Txn'>(method: K, req: unknown): Promise<unknown> {
    const r = await both(method, req);
    expect(r.mine).toEqual(r.theirs);
    return r.theirs;
  }

  it('answers a scripted history identically', async () => {
    await same('Range', rangeReq('a'));
    for (const [k, v] of [['a', 'z'], ['b', 'y'], ['c', 'x'], ['d', 'x'], ['a', 'w']]) await same('Put', putReq(k, v, { prevKv: true }));
    const all = { rangeEnd: Buffer.from([0]) };
    for (let target = 0; target <= 4; target++) {
      for (let order = 0; order <= 2; order++) {
        await same('Range', rangeReq('a', { ...all, sortTarget: target, sortOrder: order }));
        await same('Range', rangeReq('a', { ...all, sortTarget: target, sortOrder: order, limit: '2' }));
        await same('Range', rangeReq('a', { ...all, sortTarget: target, sortOrder: order, keysOnly: true }));
      }
    }
    await same('Range', rangeReq('a', { ...all, minModRevision: '4', maxModRevision: '5', limit: '1' }));
    await same('Range', rangeReq('a', { ...all, minCreateRevision: '3', countOnly: true }));
    await same('Range', rangeReq('a', { rangeEnd: 'c', keysOnly: true, limit: '1' }));
    await same('Range', rangeReq('a', { revision: '2' }));
    await same('Range', rangeReq('a', { revision: '99' }));
    await same('Range', rangeReq(Buffer.from([0]), { rangeEnd: Buffer.from([0]), countOnly: true }));
    await same('DeleteRange', delReq('nothing'));
    await same('DeleteRange', delReq('c', 'e', true));
    await same('Put', putReq('c', 'again', { prevKv: true }));
    await same('Txn', txnReq([cmp('a', 'value', '=', 'w')], [op.put(putReq('k', 'new')), op.range(rangeReq('k')), op.txn(txnReq([cmp('k', 'version', '=', '0')], [op.put(putReq('n', '1')), op.range(rangeReq('a', { ...all, limit: '1' }))], []))], []));
    await same('Txn', txnReq([cmp('a', 'value', '=', 'nope')], [op.put(putReq('x', 'y'))], [op.range(rangeReq('k')), op.txn(txnReq([], [], []))]));
    await same('Txn', txnReq([cmp('zz', 'value', '!=', 'a')], [], [op.del(delReq('n', undefined, true))]));
    await same('Txn', txnReq([cmp('a', 'modRevision', '>', '1', Buffer.from([0]))], [op.range(rangeReq('a', { revision: '1000' }))]));
    await same('Txn', txnReq([], [op.put(putReq('b', '', { ignoreValue: true, prevKv: true }))]));
    await same('Put', putReq('zzz', '', { ignoreLease: true }));
    await same('Put', putReq('zzz', 'v', { lease: '12345' }));
    // Leases: attach, compare, keep with ignore_lease, see them in prev_kv.
    await call(client.lease.LeaseGrant, { ID: String(LEASE_ID), TTL: '600' });
    await same('Put', putReq('l1', 'v', { lease: String(LEASE_ID) }));
    await same('Txn', txnReq([cmp('l1', 'lease', '=', String(LEASE_ID))], [op.put(putReq('l1', 'w', { ignoreLease: true, prevKv: true }))]));
    await same('Txn', txnReq([cmp('l1', 'lease', '>', '0')], [op.del(delReq('l1', undefined, true))]));
    await same('Put', putReq('l2', '', { lease: String(LEASE_ID), ignoreValue: true }));
    // HashKV over the same history matches bit for bit (same record layout as etcd).
    const theirs = (await call<pb.HashKVResponse>(client.maint.HashKV, { revision: '0' })) as pb.HashKVResponse;
    const h = await mine!.s.store.hashKV(0);
    expect({ hash: h.hash, compactRevision: String(h.compactRevision) }).toEqual({ hash: theirs.hash, compactRevision: theirs.compactRevision });
    expect(String(mine!.s.store.currentRevision())).toBe(theirs.header?.revision);

    // Compaction at a revision that is a tombstone (10: delete of n), then at 4 (too old).
    const compactTheirs = async (rev: string) => {
      try {
        return strip(await call(client.kv.Compact, { revision: rev, physical: true }));
      } catch (e) {
        return { error: (e as grpc.ServiceError).details };
      }
    };
    const compactMine = async (rev: string) => {
      try {
        const { resp, done } = mine!.s.backend.batch(() => applyCompaction(mine!.s.store, { revision: rev, physical: true }));
        await done;
        return strip(resp);
      } catch (e) {
        if (!(e instanceof EtcdError)) throw e;
        return { error: e.message };
      }
    };
    for (const rev of ['99', '10', '10', '4']) expect(await compactMine(rev)).toEqual(await compactTheirs(rev));
    await same('Range', rangeReq('a', { rangeEnd: Buffer.from([0]), revision: '9' }));
    await same('Range', rangeReq('a', { rangeEnd: Buffer.from([0]), revision: '10' }));
    await same('Range', rangeReq('n', { revision: '9' }));
    for (const rev of ['0', '10', '11', '9', '12']) {
      let t: unknown;
      try {
        const r = await call<pb.HashKVResponse>(client.maint.HashKV, { revision: rev });
        t = { hash: r.hash, compactRevision: r.compactRevision };
      } catch (e) {
        t = { error: (e as grpc.ServiceError).details };
      }
      let m: unknown;
      try {
        const r = await mine!.s.store.hashKV(Number(rev));
        m = { hash: r.hash, compactRevision: String(r.compactRevision) };
      } catch (e) {
        m = { error: (e as Error).message };
      }
      if (rev === '10') {
        // HashKV at exactly the compact revision: etcd 3.4 refuses (<=); 3.6 answers the hash that
        // compaction kept, with the compact revision before it (-1: none), as ours does.
        expect(t).toEqual({ error: 'etcdserver: mvcc: required revision has been compacted' });
        expect(m).toMatchObject({ compactRevision: '-1' });
        continue;
      }
      expect({ rev, m }).toEqual({ rev, m: t });
    }
  });
});
