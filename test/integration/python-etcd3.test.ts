// python-etcd3 (Debian's python3-etcd3 0.12 under /usr/bin/python3) against the server under test.
// Each test runs a script that prints one JSON document on its last line.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { etcdctl } from '../helpers/etcdctl';
import { EtcdMember, startEtcd } from '../helpers/etcd-process';
import { python3EtcdJson } from '../helpers/python';

let m: EtcdMember;

beforeAll(async () => {
  m = await startEtcd();
});
afterAll(async () => {
  await m?.stop();
});

const PRELUDE = `
import etcd3, json, os, sys, threading, time
c = etcd3.client(os.environ['ETCD_HOST'], int(os.environ['ETCD_PORT']), timeout=10)
def s(b):
    return None if b is None else b.decode()
def meta(md):
    if md is None:
        return None
    return {'key': s(md.key), 'create': md.create_revision, 'mod': md.mod_revision, 'version': md.version, 'lease': str(md.lease_id)}
out = {}
`;

function py<T>(body: string): Promise<T> {
  return python3EtcdJson<T>(`${PRELUDE}\n${body}\nprint(json.dumps(out))\n`, { endpoint: m.clientHostPort });
}

describe('python-etcd3', () => {
  it('put, get, get_prefix, delete', async () => {
    const r = await py<Record<string, unknown>>(`
r1 = c.put('p/a', 'one')
c.put('p/b', 'two')
c.put('q', 'outside')
v, md = c.get('p/a')
out['get'] = [s(v), meta(md)]
out['put_rev'] = r1.header.revision
out['missing'] = list(c.get('p/none'))
out['prefix'] = [[s(v), s(md.key)] for v, md in c.get_prefix('p/')]
out['prefix_desc'] = [s(md.key) for v, md in c.get_prefix('p/', sort_order='descend')]
out['delete'] = c.delete('p/a')
out['delete_again'] = c.delete('p/a')
out['after'] = [s(md.key) for v, md in c.get_prefix('p/')]
c.put('p/b', 'three')
v2, md2 = c.get('p/b')
out['version'] = md2.version
`);
    const rev = r['put_rev'] as number;
    expect(r['get']).toEqual(['one', { key: 'p/a', create: rev, mod: rev, version: 1, lease: '0' }]);
    expect(r['missing']).toEqual([null, null]);
    expect(r['prefix']).toEqual([
      ['one', 'p/a'],
      ['two', 'p/b'],
    ]);
    expect(r['prefix_desc']).toEqual(['p/b', 'p/a']);
    expect(r['delete']).toBe(true);
    expect(r['delete_again']).toBe(false);
    expect(r['after']).toEqual(['p/b']);
    expect(r['version']).toBe(2);
  });

  it('replace (compare-and-swap) and transaction', async () => {
    const r = await py<Record<string, unknown>>(`
c.put('t/k', 'a')
out['replace_ok'] = c.replace('t/k', 'a', 'b')
out['replace_stale'] = c.replace('t/k', 'a', 'c')
out['value'] = s(c.get('t/k')[0])
ok, resp = c.transaction(
    compare=[c.transactions.value('t/k') == 'b', c.transactions.version('t/k') == 2],
    success=[c.transactions.put('t/k', 'd'), c.transactions.put('t/k2', 'x')],
    failure=[c.transactions.put('t/fail', 'f')])
out['txn1'] = ok
ok, resp = c.transaction(
    compare=[c.transactions.create('t/k') > 1000000],
    success=[c.transactions.put('t/k', 'never')],
    failure=[c.transactions.put('t/fail', 'f'), c.transactions.get('t/k')])
out['txn2'] = ok
out['txn2_get'] = [[s(v), s(md.key)] for v, md in resp[1]]
ok, resp = c.transaction(compare=[c.transactions.mod('t/none') == 0], success=[c.transactions.delete('t/k2')], failure=[])
out['txn3'] = ok
out['final'] = [[s(md.key), s(v)] for v, md in c.get_prefix('t/')]
`);
    expect(r['replace_ok']).toBe(true);
    expect(r['replace_stale']).toBe(false);
    expect(r['value']).toBe('b');
    expect(r['txn1']).toBe(true);
    expect(r['txn2']).toBe(false);
    expect(r['txn2_get']).toEqual([['d', 't/k']]);
    expect(r['txn3']).toBe(true);
    expect(r['final']).toEqual([
      ['t/fail', 'f'],
      ['t/k', 'd'],
    ]);
  });

  it('lease grant, keys, refresh, revoke', async () => {
    const r = await py<Record<string, unknown>>(`
l = c.lease(30)
c.put('l/k1', 'v', lease=l)
c.put('l/k2', 'v', lease=l.id)
out['id'] = str(l.id)
out['granted'] = l.granted_ttl
out['remaining'] = l.remaining_ttl
out['keys'] = sorted(s(k) for k in l.keys)
out['meta_lease'] = meta(c.get('l/k1')[1])['lease']
out['refresh_ttl'] = l.refresh()[0].TTL
l.revoke()
out['after_revoke'] = [s(md.key) for v, md in c.get_prefix('l/')]
out['ttl_after'] = l.remaining_ttl
try:
    l.revoke()
    out['revoke_again'] = 'no error'
except Exception as e:
    out['revoke_again'] = type(e).__name__ + ': ' + str(e)
`);
    expect(BigInt(r['id'] as string)).toBeGreaterThan(0n);
    expect(r['granted']).toBe(30);
    expect(r['remaining']).toBeGreaterThanOrEqual(28);
    expect(r['remaining']).toBeLessThanOrEqual(30);
    expect(r['keys']).toEqual(['l/k1', 'l/k2']);
    expect(r['meta_lease']).toBe(r['id']);
    expect(r['refresh_ttl']).toBe(30);
    expect(r['after_revoke']).toEqual([]);
    expect(r['ttl_after']).toBe(-1);
    expect(r['revoke_again']).toContain('etcdserver: requested lease not found');
  });

  it('watch iterator and watch callback see puts and deletes', async () => {
    const r = await py<Record<string, unknown>>(`
events, cancel = c.watch_prefix('w/')
# Bound the blocking iterator: cancel after 10 s whatever happens.
guard = threading.Timer(10.0, cancel)
guard.start()
def writer():
    time.sleep(0.3)
    c.put('w/a', '1')
    c.put('x/outside', '1')
    c.delete('w/a')
threading.Thread(target=writer).start()
seen = []
for e in events:
    seen.append([type(e).__name__, s(e.key), s(e.value)])
    if len(seen) == 2:
        cancel()
guard.cancel()
out['iterator'] = seen

got = []
done = threading.Event()
def cb(resp):
    if isinstance(resp, Exception):
        got.append(['error', str(resp)])
        done.set()
        return
    for e in resp.events:
        got.append([type(e).__name__, s(e.key), s(e.value)])
    if len(got) >= 2:
        done.set()
wid = c.add_watch_callback('w/cb', cb)
c.put('w/cb', 'v1')
c.put('w/cb', 'v2')
done.wait(10)
c.cancel_watch(wid)
out['callback'] = got

start = c.put('w/h', 'h1').header.revision
c.put('w/h', 'h2')
events, cancel = c.watch('w/h', start_revision=start)
guard = threading.Timer(10.0, cancel)
guard.start()
hist = []
for e in events:
    hist.append([type(e).__name__, s(e.value)])
    if len(hist) == 2:
        cancel()
guard.cancel()
out['history'] = hist
`);
    expect(r['iterator']).toEqual([
      ['PutEvent', 'w/a', '1'],
      ['DeleteEvent', 'w/a', ''],
    ]);
    expect(r['callback']).toEqual([
      ['PutEvent', 'w/cb', 'v1'],
      ['PutEvent', 'w/cb', 'v2'],
    ]);
    expect(r['history']).toEqual([
      ['PutEvent', 'h1'],
      ['PutEvent', 'h2'],
    ]);
  });

  it('status and members', async () => {
    const r = await py<Record<string, unknown>>(`
st = c.status()
out['status'] = {'version': st.version, 'db_size': st.db_size, 'leader': str(st.leader.id), 'raft_index': st.raft_index, 'raft_term': st.raft_term}
out['members'] = [{'id': str(x.id), 'name': x.name, 'peer_urls': list(x.peer_urls), 'client_urls': list(x.client_urls)} for x in c.members]
`);
    const st = r['status'] as Record<string, unknown>;
    const members = r['members'] as Record<string, unknown>[];
    expect(st['version']).toMatch(/^3\.\d+\.\d+$/);
    expect(st['db_size']).toBeGreaterThan(0);
    expect(st['raft_index']).toBeGreaterThan(0);
    expect(st['raft_term']).toBeGreaterThanOrEqual(1);
    expect(members).toEqual([{ id: st['leader'], name: m.name, peer_urls: [m.peerUrl], client_urls: [m.clientUrl] }]);
  });

  it('reports a compacted revision as an error with etcd text', async () => {
    const r = await py<Record<string, unknown>>(`
r1 = c.put('e/k', 'a').header.revision
r2 = c.put('e/k', 'b').header.revision
# python-etcd3 0.12 drops get(revision=...), so the compaction errors are checked on compact().
def attempt(f):
    try:
        f()
        return None
    except Exception as e:
        return [e.code().name, e.details()] if hasattr(e, 'details') else [type(e).__name__, str(e)]
out['first'] = attempt(lambda: c.compact(r2, physical=True))
out['err'] = attempt(lambda: c.compact(r1))
out['future'] = attempt(lambda: c.compact(r2 + 1000))
out['ok'] = s(c.get('e/k')[0])
`);
    expect(r['first']).toBeNull();
    expect(r['err']).toEqual(['OUT_OF_RANGE', 'etcdserver: mvcc: required revision has been compacted']);
    expect(r['future']).toEqual(['OUT_OF_RANGE', 'etcdserver: mvcc: required revision is a future revision']);
    expect(r['ok']).toBe('b');
  });

  it("saves a snapshot that etcdctl reads: several chunks, each under the client's receive limit", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'py-snap-'));
    try {
      const file = path.join(dir, 'snap.db');
      const r = await py<{ size: number }>(`
for i in range(400):
    c.put('snap/%03d' % i, 'v%03d' % i * 500)
with open(${JSON.stringify(file)}, 'wb') as f:
    c.snapshot(f)
out['size'] = os.path.getsize(${JSON.stringify(file)})
`);
      // ~0.8 MB of values: several chunks of 256 KiB.
      expect(r.size).toBeGreaterThan(3 * 256 * 1024);
      const st = await etcdctl(['snapshot', 'status', file, '-w', 'json'], { endpoint: m.clientHostPort });
      expect(st.code, st.stderr).toBe(0);
      const status = JSON.parse(st.stdout) as { totalKey: number; revision: number };
      expect(status.totalKey).toBeGreaterThanOrEqual(400);
      expect(status.revision).toBeGreaterThanOrEqual(400);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
