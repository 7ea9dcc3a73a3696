// The contract kube-apiserver's etcd3 storage relies on (k8s.io/apiserver/pkg/storage/etcd3),
// driven through mutual TLS with the apiserver-etcd-client certificate, against our server and
// the real etcd in the same run: a property that fails only for ours is our bug.
import fs from 'node:fs';
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateKubeadmPki, type KubeadmPki } from '../helpers/certs';
import { apiserverClient, OUR_ETCD, REAL_ETCD, startKubeadmCluster, type KubeadmCluster, type KubeClient, type Msg } from '../helpers/kubeadm';
import { sleepMs, waitFor } from '../helpers/wait';

const b = (s: string): Buffer => Buffer.from(s);
// Enum numbers of etcd's rpc.proto (the etcd3 package's copy spells the names differently).
const EQUAL = 0;
const TARGET_VERSION = 0;
const TARGET_MOD = 2;
const COMPACTED = 'etcdserver: mvcc: required revision has been compacted';

interface Kv {
  key: Buffer;
  value: Buffer;
  mod_revision: string;
  create_revision: string;
  version: string;
  lease: string;
}

function headerRev(m: Msg): number {
  return Number((m['header'] as { revision: string }).revision);
}

function prefixEnd(prefix: string): Buffer {
  const e = Buffer.from(prefix);
  e[e.length - 1] = e[e.length - 1]! + 1;
  return e;
}

function txnRange(m: Msg, i = 0): Msg {
  return ((m['responses'] as Msg[])[i]!['response_range'] as Msg) ?? {};
}

/** A Watch stream with a bounded inbox. */
class WatchInbox {
  readonly msgs: Msg[] = [];
  error: Error | undefined;
  private static readonly MAX = 10_000;
  constructor(readonly stream: grpc.ClientDuplexStream<Msg, Msg>) {
    stream.on('data', (m: Msg) => {
      if (this.msgs.length < WatchInbox.MAX) this.msgs.push(m);
    });
    stream.on('error', (e: Error) => {
      this.error = e;
    });
  }
  events(): Msg[] {
    return this.msgs.flatMap((m) => (m['events'] as Msg[] | undefined) ?? []);
  }
  close(): void {
    this.stream.end();
    this.stream.cancel();
  }
}

/** kube-apiserver's guaranteed update: read-modify-write retried from the else-branch read. */
async function kubeUpdate(c: KubeClient, key: string, change: (old: string) => string): Promise<{ conflicts: number }> {
  let current = ((await c.unary('KV', 'Range', { key: b(key) }))['kvs'] as Kv[])[0]!;
  let conflicts = 0;
  for (let attempt = 0; attempt < 100; attempt++) {
    const r = await c.unary('KV', 'Txn', {
      compare: [{ result: EQUAL, target: TARGET_MOD, key: b(key), mod_revision: current.mod_revision }],
      success: [{ request_put: { key: b(key), value: b(change(current.value.toString())) } }],
      failure: [{ request_range: { key: b(key) } }],
    });
    if (r['succeeded'] === true) return { conflicts };
    conflicts++;
    const fresh = (txnRange(r)['kvs'] as Kv[])[0]!;
    expect(Number(fresh.mod_revision)).toBeGreaterThan(Number(current.mod_revision));
    current = fresh;
  }
  throw new Error('update did not converge in 100 attempts');
}

/** One round of kube-apiserver's compactor (storage/etcd3/compact.go). */
async function kubeCompact(c: KubeClient, t: number, rev: number): Promise<{ t: number; rev: number; compacted: boolean }> {
  const r = await c.unary('KV', 'Txn', {
    compare: [{ result: EQUAL, target: TARGET_VERSION, key: b('compact_rev_key'), version: String(t) }],
    success: [{ request_put: { key: b('compact_rev_key'), value: b(String(rev)) } }],
    failure: [{ request_range: { key: b('compact_rev_key') } }],
  });
  const curRev = headerRev(r);
  if (r['succeeded'] !== true) {
    return { t: Number(((txnRange(r)['kvs'] as Kv[])[0]!).version), rev: curRev, compacted: false };
  }
  if (rev === 0) return { t: t + 1, rev: curRev, compacted: false };
  await c.unary('KV', 'Compact', { revision: String(rev) });
  return { t: t + 1, rev: curRev, compacted: true };
}

/** The three-member rehearsal runs by default; KUBEADM_HA=0 leaves it out (e.g. on a single slow core). */
const WITH_HA = process.env['KUBEADM_HA'] !== '0';
const targets: Array<{ label: string; bin: string; style: 'new' | 'old'; members: number }> = [{ label: 'ours', bin: OUR_ETCD, style: 'new', members: 1 }];
if (fs.existsSync(REAL_ETCD)) targets.push({ label: 'real etcd', bin: REAL_ETCD, style: 'old', members: 1 });
if (WITH_HA) {
  targets.push({ label: 'ours, 3 control-plane members', bin: OUR_ETCD, style: 'new', members: 3 });
  if (fs.existsSync(REAL_ETCD)) targets.push({ label: 'real etcd, 3 control-plane members', bin: REAL_ETCD, style: 'old', members: 3 });
}

describe.each(targets)('storage contract against $label', ({ bin, style, members }) => {
  let cluster: KubeadmCluster;
  let pki: KubeadmPki;
  let c: KubeClient;
  const clients: KubeClient[] = [];

  beforeAll(async () => {
    cluster = await startKubeadmCluster(bin, members, style, generateKubeadmPki);
    pki = cluster.pki;
    c = apiserverClient(cluster.targets[0]!, pki);
  }, 120_000);

  afterAll(async () => {
    c?.close();
    for (const x of clients) x.close();
    await cluster?.stop();
  });

  // Each control-plane node's kube-apiserver talks to its own member.
  const another = (): KubeClient => {
    const x = apiserverClient(cluster.targets[(clients.length + 1) % cluster.targets.length]!, pki);
    clients.push(x);
    return x;
  };

  it('create is Txn(mod_revision == 0) then Put; a second create fails and reads the existing object', async () => {
    const key = b('/registry/configmaps/default/cm1');
    const create = (value: string): Promise<Msg> =>
      c.unary('KV', 'Txn', {
        compare: [{ result: EQUAL, target: TARGET_MOD, key, mod_revision: '0' }],
        success: [{ request_put: { key, value: b(value) } }],
        failure: [{ request_range: { key } }],
      });
    const first = await create('v1');
    expect(first['succeeded']).toBe(true);
    const putRev = headerRev(first);
    const second = await create('v2');
    expect(second['succeeded']).toBe(false);
    const existing = (txnRange(second)['kvs'] as Kv[])[0]!;
    expect(existing.value.toString()).toBe('v1');
    expect(Number(existing.mod_revision)).toBe(putRev);
    expect(Number(existing.create_revision)).toBe(putRev);
  });

  it('creates TTL objects with a lease attached', async () => {
    const g = await c.unary('Lease', 'LeaseGrant', { TTL: '60', ID: '0' });
    const leaseId = g['ID'] as string;
    const key = b('/registry/leases/kube-node-lease/node-a');
    const r = await c.unary('KV', 'Txn', {
      compare: [{ result: EQUAL, target: TARGET_MOD, key, mod_revision: '0' }],
      success: [{ request_put: { key, value: b('lease-object'), lease: leaseId } }],
      failure: [{ request_range: { key } }],
    });
    expect(r['succeeded']).toBe(true);
    const kv = ((await c.unary('KV', 'Range', { key }))['kvs'] as Kv[])[0]!;
    expect(kv.lease).toBe(leaseId);
    const ttl = await c.unary('Lease', 'LeaseTimeToLive', { ID: leaseId, keys: true });
    expect((ttl['keys'] as Buffer[]).map((k) => k.toString())).toEqual([key.toString()]);
  });

  it('update and delete are guarded by mod_revision; concurrent writers conflict and retry from the else read', async () => {
    const key = '/registry/counters/default/c';
    await c.unary('KV', 'Put', { key: b(key), value: b('0') });
    const writers = [c, another(), another(), another()];
    const perWriter = 5;
    const results = await Promise.all(
      writers.map(async (w) => {
        let conflicts = 0;
        for (let i = 0; i < perWriter; i++) conflicts += (await kubeUpdate(w, key, (old) => String(Number(old) + 1))).conflicts;
        return conflicts;
      }),
    );
    const kv = ((await c.unary('KV', 'Range', { key: b(key) }))['kvs'] as Kv[])[0]!;
    expect(kv.value.toString()).toBe(String(writers.length * perWriter));
    expect(Number(kv.version)).toBe(writers.length * perWriter + 1);
    // Every conflict was answered with a newer object (checked in kubeUpdate) and retried.
    expect(results).toHaveLength(writers.length);

    // Delete with a stale revision fails and returns the current object; with the right one it deletes.
    const stale = await c.unary('KV', 'Txn', {
      compare: [{ result: EQUAL, target: TARGET_MOD, key: b(key), mod_revision: String(Number(kv.mod_revision) - 1) }],
      success: [{ request_delete_range: { key: b(key) } }],
      failure: [{ request_range: { key: b(key) } }],
    });
    expect(stale['succeeded']).toBe(false);
    expect(((txnRange(stale)['kvs'] as Kv[])[0]!).mod_revision).toBe(kv.mod_revision);
    const del = await c.unary('KV', 'Txn', {
      compare: [{ result: EQUAL, target: TARGET_MOD, key: b(key), mod_revision: kv.mod_revision }],
      success: [{ request_delete_range: { key: b(key) } }],
      failure: [{ request_range: { key: b(key) } }],
    });
    expect(del['succeeded']).toBe(true);
    expect(((del['responses'] as Msg[])[0]!['response_delete_range'] as Msg)['deleted']).toBe('1');
  });

  it('lists page by page at the revision of the first page, continuing from last key + "\\x00"', async () => {
    const prefix = '/registry/pods/paged/';
    for (let i = 0; i < 25; i++) await c.unary('KV', 'Put', { key: b(`${prefix}pod-${String(i).padStart(2, '0')}`), value: b(`v${i}`) });
    const pageSize = 10;
    const first = await c.unary('KV', 'Range', { key: b(prefix), range_end: prefixEnd(prefix), limit: String(pageSize) });
    const listRev = headerRev(first);
    expect(first['more']).toBe(true);
    expect(first['count']).toBe('25');
    // Writes after the first page must not show up in later pages.
    await c.unary('KV', 'Put', { key: b(`${prefix}pod-99`), value: b('late') });
    await c.unary('KV', 'DeleteRange', { key: b(`${prefix}pod-20`) });
    const seen = (first['kvs'] as Kv[]).map((k) => k.key.toString());
    let page = first;
    let remaining = Number(first['count']) - seen.length;
    while (page['more'] === true) {
      const last = (page['kvs'] as Kv[]).at(-1)!.key;
      page = await c.unary('KV', 'Range', {
        key: Buffer.concat([last, Buffer.from([0])]),
        range_end: prefixEnd(prefix),
        limit: String(pageSize),
        revision: String(listRev),
      });
      expect(headerRev(page)).toBeGreaterThan(listRev);
      const kvs = page['kvs'] as Kv[];
      // kube-apiserver judges what is left by count (remaining items incl. this page).
      expect(Number(page['count'])).toBe(remaining);
      seen.push(...kvs.map((k) => k.key.toString()));
      remaining -= kvs.length;
    }
    expect(seen).toEqual(Array.from({ length: 25 }, (_, i) => `${prefix}pod-${String(i).padStart(2, '0')}`));
    expect(remaining).toBe(0);
  });

  it('answers count-only and keys-only ranges', async () => {
    const prefix = '/registry/pods/paged/';
    const cnt = await c.unary('KV', 'Range', { key: b(prefix), range_end: prefixEnd(prefix), count_only: true });
    expect(cnt['count']).toBe('25');
    expect(cnt['kvs']).toEqual([]);
    const keys = await c.unary('KV', 'Range', { key: b(prefix), range_end: prefixEnd(prefix), keys_only: true, limit: '3' });
    const kvs = keys['kvs'] as Kv[];
    expect(kvs).toHaveLength(3);
    for (const kv of kvs) {
      expect(kv.value.length).toBe(0);
      expect(Number(kv.mod_revision)).toBeGreaterThan(0);
    }
    expect(keys['more']).toBe(true);
  });

  it('watches from rev+1 with prev_kv on every non-create event, with hasleader metadata; progress requests act as bookmarks', async () => {
    const prefix = '/registry/secrets/w/';
    const start = headerRev(await c.unary('KV', 'Put', { key: b(`${prefix}a`), value: b('1') }));
    await c.unary('KV', 'Put', { key: b(`${prefix}a`), value: b('2') });
    await c.unary('KV', 'DeleteRange', { key: b(`${prefix}a`) });
    const md = new grpc.Metadata();
    md.set('hasleader', 'true');
    const w = new WatchInbox(c.bidi('Watch', 'Watch', md));
    try {
      w.stream.write({ create_request: { key: b(prefix), range_end: prefixEnd(prefix), start_revision: String(start + 1), prev_kv: true } });
      await waitFor('update and delete events', () => (w.events().length >= 2 ? true : undefined), { timeoutMs: 10_000 });
      const [upd, del] = w.events() as [Msg, Msg];
      expect(upd['type']).toBe('Put');
      expect(((upd['prev_kv'] as Kv).value).toString()).toBe('1');
      expect(del['type']).toBe('Delete');
      expect(((del['prev_kv'] as Kv).value).toString()).toBe('2');
      // A create has no prev_kv.
      const createRev = headerRev(await c.unary('KV', 'Put', { key: b(`${prefix}b`), value: b('new') }));
      w.stream.write({ progress_request: {} });
      const progress = await waitFor(
        'progress response',
        () => w.msgs.find((m) => m['created'] !== true && ((m['events'] as Msg[]) ?? []).length === 0 && headerRev(m) >= createRev),
        { timeoutMs: 10_000 },
      );
      const created = w.events()[2]!;
      expect(created['type']).toBe('Put');
      expect(created['prev_kv']).toBeNull();
      // The bookmark comes after the event it covers.
      expect(w.msgs.indexOf(progress)).toBeGreaterThan(w.msgs.findIndex((m) => ((m['events'] as Msg[]) ?? []).length > 0 && headerRev(m) === createRev));
      expect(w.error).toBeUndefined();
    } finally {
      w.close();
    }
  });

  it('sends progress notifications every --watch-progress-notify-interval (kubeadm: 5 s)', async () => {
    const w = new WatchInbox(c.bidi('Watch', 'Watch'));
    try {
      w.stream.write({ create_request: { key: b('/registry/quiet/'), range_end: prefixEnd('/registry/quiet/'), progress_notify: true } });
      await waitFor('created', () => w.msgs.some((m) => m['created'] === true));
      const isProgress = (m: Msg): boolean => m['created'] !== true && ((m['events'] as Msg[]) ?? []).length === 0;
      // etcd ticks one timer for all watchers: the first notification comes within one interval.
      await waitFor('a progress notification', () => w.msgs.some(isProgress), { timeoutMs: 11_000, intervalMs: 100 });
      // ... and the next not before the interval has passed again.
      await sleepMs(2_000);
      expect(w.msgs.filter(isProgress)).toHaveLength(1);
    } finally {
      w.close();
    }
  }, 30_000);

  it('compacts the way kube-apiserver does, several apiservers at once; old lists and watches get the compacted error', async () => {
    const compactors = [c, another(), another()];
    const state = compactors.map(() => ({ t: 0, rev: 0 }));
    const compactedAt: number[] = [];
    for (let round = 0; round < 4; round++) {
      await c.unary('KV', 'Put', { key: b('/registry/events/default/tick'), value: b(String(round)) });
      const out = await Promise.all(compactors.map((x, i) => kubeCompact(x, state[i]!.t, state[i]!.rev)));
      out.forEach((o, i) => {
        if (o.compacted) compactedAt.push(state[i]!.rev);
        state[i] = { t: o.t, rev: o.rev };
      });
    }
    expect(compactedAt.length).toBeGreaterThan(0);
    // One winner per round: compact_rev_key's version counts the rounds that went through.
    const k = ((await c.unary('KV', 'Range', { key: b('compact_rev_key') }))['kvs'] as Kv[])[0]!;
    expect(Number(k.version)).toBe(compactedAt.length + 1);
    const lastCompact = Math.max(...compactedAt);
    const err = await c
      .unary('KV', 'Range', { key: b('/registry/'), range_end: prefixEnd('/registry/'), limit: '10', revision: String(lastCompact - 1) })
      .then(() => undefined, (x: grpc.ServiceError) => x);
    expect(err?.code).toBe(grpc.status.OUT_OF_RANGE);
    expect(err?.details).toBe(COMPACTED);
    const w = new WatchInbox(c.bidi('Watch', 'Watch'));
    try {
      w.stream.write({ create_request: { key: b('/registry/'), range_end: prefixEnd('/registry/'), start_revision: String(lastCompact - 1) } });
      const m = await waitFor('compacted watch response', () => w.msgs.find((x) => x['canceled'] === true || Number(x['compact_revision']) > 0));
      expect(Number(m['compact_revision'])).toBe(lastCompact);
    } finally {
      w.close();
    }
  });

  it('keeps event objects on a shared 3660 s lease without keepalives, and deletes objects with DELETE events when a lease expires', async () => {
    const long = await c.unary('Lease', 'LeaseGrant', { TTL: '3660', ID: '0' });
    expect(long['TTL']).toBe('3660');
    for (let i = 0; i < 5; i++) {
      await c.unary('KV', 'Put', { key: b(`/registry/events/default/e${i}`), value: b('event'), lease: long['ID'] as string });
    }
    const ttl = await c.unary('Lease', 'LeaseTimeToLive', { ID: long['ID'] as string, keys: true });
    expect(Number(ttl['TTL'])).toBeGreaterThan(3600);
    expect(ttl['grantedTTL']).toBe('3660');
    expect(ttl['keys'] as Buffer[]).toHaveLength(5);

    const short = await c.unary('Lease', 'LeaseGrant', { TTL: '2', ID: '0' });
    const prefix = '/registry/events/expiring/';
    for (let i = 0; i < 3; i++) await c.unary('KV', 'Put', { key: b(`${prefix}e${i}`), value: b('event'), lease: short['ID'] as string });
    const w = new WatchInbox(c.bidi('Watch', 'Watch'));
    try {
      w.stream.write({ create_request: { key: b(prefix), range_end: prefixEnd(prefix), prev_kv: true } });
      await waitFor('three DELETE events after expiry', () => (w.events().filter((x) => x['type'] === 'Delete').length === 3 ? true : undefined), {
        timeoutMs: 15_000,
        intervalMs: 100,
      });
      for (const ev of w.events()) expect(((ev['prev_kv'] as Kv).value).toString()).toBe('event');
      const left = await c.unary('KV', 'Range', { key: b(prefix), range_end: prefixEnd(prefix), count_only: true });
      expect(left['count']).toBe('0');
    } finally {
      w.close();
    }
  }, 30_000);

  it('answers the /registry/health get and Status with version and dbSize', async () => {
    const h = await c.unary('KV', 'Range', { key: b('/registry/health') });
    expect(h['count']).toBe('0');
    const st = await c.unary('Maintenance', 'Status', {});
    expect(st['version']).toMatch(/^3\.\d+\.\d+/);
    expect(Number(st['dbSize'])).toBeGreaterThan(0);
    if (members === 1) expect(st['leader']).toBe((st['header'] as { member_id: string }).member_id);
    else expect(st['leader']).not.toBe('0');
  });
});
