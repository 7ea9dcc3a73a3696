// The `etcd3` npm client (Microsoft's, v1.1) against the server under test.
import { Etcd3, EtcdLeaseInvalidError, EtcdLockFailedError, GRPCOutOfRangeError, IKeyValue, Watcher } from 'etcd3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EtcdMember, startEtcd } from '../helpers/etcd-process';
import { waitFor, withTimeout } from '../helpers/wait';

let m: EtcdMember;
let client: Etcd3;
const watchers: Watcher[] = [];

beforeAll(async () => {
  m = await startEtcd();
  client = new Etcd3({ hosts: m.clientUrl, dialTimeout: 5_000 });
});
afterAll(async () => {
  for (const w of watchers) await w.cancel().catch(() => undefined);
  client?.close();
  await m?.stop();
});

async function currentRevision(): Promise<number> {
  const r = await client.get('any-key').exec();
  return Number(r.header.revision);
}

describe('kv', () => {
  it('puts, gets, lists a prefix and deletes', async () => {
    await client.put('np/a').value('1');
    await client.put('np/b').value('2');
    await client.put('np/c').value('3');
    await client.put('nq').value('outside');
    expect(await client.get('np/a').string()).toBe('1');
    expect(await client.get('np/none').string()).toBeNull();
    expect(await client.getAll().prefix('np/').strings()).toEqual({ 'np/a': '1', 'np/b': '2', 'np/c': '3' });
    expect(await client.getAll().prefix('np/').count()).toBe(3);
    expect(await client.getAll().prefix('np/').sort('Key', 'Descend').limit(2).keys()).toEqual(['np/c', 'np/b']);

    const del = await client.delete().key('np/a').exec();
    expect(del.deleted).toBe('1');
    const prev = await client.delete().prefix('np/').getPrevious();
    expect(prev.map((kv) => [kv.key.toString(), kv.value.toString()])).toEqual([
      ['np/b', '2'],
      ['np/c', '3'],
    ]);
    expect(await client.getAll().prefix('np/').keys()).toEqual([]);
    expect(await client.get('nq').string()).toBe('outside');
  });

  it('answers large ranges read at once over several connections with each one whole', async () => {
    // Responses over 64 KiB are encoded into reused buffers (src/runtime/buffer_pool.ts), and a range's
    // keys past its first 16 KiB are copied into reused pieces (src/pb/kv_wire.ts, WireRecords): one
    // handed back too early would show here as another response's bytes inside a value.
    // A response of more than a piece goes out as runs of those pieces, each handed back once the
    // socket wrote it (rangeResponseParts): big/d/ spans ~11 pieces, with values of 40 KB in
    // buffers of their own between them.
    const PREFIXES = ['big/a/', 'big/b/', 'big/c/', 'big/d/'];
    const keysOf = (p: string): number => (p === 'big/d/' ? 240 : 60);
    const sizeOf = (key: string): number => (key.startsWith('big/d/') && key.endsWith('5') ? 40_000 : 2048);
    const valueOf = (key: string): string => `${key}:`.repeat(Math.ceil(sizeOf(key) / (key.length + 1))).slice(0, sizeOf(key));
    const expected: Record<string, Record<string, string>> = {};
    for (const p of PREFIXES) {
      expected[p] = {};
      for (let i = 0; i < keysOf(p); i++) {
        const key = `${p}${String(i).padStart(3, '0')}`;
        expected[p][key] = valueOf(key);
        await client.put(key).value(valueOf(key));
      }
    }
    const clients = [1, 2, 3].map(() => new Etcd3({ hosts: m.clientUrl, dialTimeout: 5_000 }));
    try {
      for (let round = 0; round < 3; round++) {
        const reads = [];
        for (let i = 0; i < 24; i++) {
          const p = PREFIXES[i % PREFIXES.length]!;
          reads.push(clients[i % clients.length]!.getAll().prefix(p).strings().then((got) => [p, got] as const));
        }
        for (const [p, got] of await withTimeout('large ranges', Promise.all(reads), 30_000)) expect(got).toEqual(expected[p]);
      }
    } finally {
      for (const c of clients) c.close();
    }
  });

  it('reports revisions, versions and reads an older revision', async () => {
    const p1 = await client.put('nr/k').value('v1').exec();
    const p2 = await client.put('nr/k').value('v2').exec();
    expect(Number(p2.header.revision)).toBe(Number(p1.header.revision) + 1);
    const r = await client.get('nr/k').exec();
    expect(r.kvs[0]).toMatchObject({ version: '2', create_revision: p1.header.revision, mod_revision: p2.header.revision });
    expect(await client.get('nr/k').revision(p1.header.revision).string()).toBe('v1');
    const prev = await client.put('nr/k').value('v3').getPrevious();
    expect(prev?.value.toString()).toBe('v2');
  });
});

describe('txn', () => {
  it('takes the then branch when the compare holds and the else branch otherwise', async () => {
    await client.put('nt/k').value('a');
    const ok = await client.if('nt/k', 'Value', '==', 'a').then(client.put('nt/k').value('b')).else(client.put('nt/other').value('x')).commit();
    expect(ok.succeeded).toBe(true);
    expect(await client.get('nt/k').string()).toBe('b');

    const no = await client
      .if('nt/k', 'Value', '==', 'a')
      .then(client.put('nt/k').value('c'))
      .else(client.put('nt/other').value('x'), client.get('nt/k'))
      .commit();
    expect(no.succeeded).toBe(false);
    expect(no.responses).toHaveLength(2);
    expect(no.responses[1]?.response_range?.kvs[0]?.value.toString()).toBe('b');
    expect(await client.get('nt/other').string()).toBe('x');

    const ver = await client.if('nt/k', 'Version', '==', 2).and('nt/none', 'Create', '==', 0).then(client.delete().key('nt/other')).commit();
    expect(ver.succeeded).toBe(true);
    expect(await client.get('nt/other').string()).toBeNull();
  });
});

describe('lease', () => {
  it('keeps a lease alive past its TTL and deletes its keys on revoke', async () => {
    const lease = client.lease(3);
    let keepalives = 0;
    lease.on('keepaliveSucceeded', () => {
      keepalives++;
    });
    const id = await lease.grant();
    await lease.put('nl/k').value('v');
    const ttl = await client.leaseClient.leaseTimeToLive({ ID: id, keys: true });
    expect(ttl.grantedTTL).toBe('3');
    expect(ttl.keys.map((k) => k.toString())).toEqual(['nl/k']);

    // The client renews every TTL/3 s; five renewals span more than the 3 s TTL.
    await waitFor('5 keepalives', () => keepalives >= 5, { timeoutMs: 15_000, intervalMs: 100 });
    expect(await client.get('nl/k').string()).toBe('v');
    expect(lease.revoked()).toBe(false);

    await lease.revoke();
    expect(await client.get('nl/k').string()).toBeNull();
    await expect(client.leaseClient.leaseTimeToLive({ ID: id })).resolves.toMatchObject({ TTL: '-1' });
    await expect(client.leaseClient.leaseRevoke({ ID: id })).rejects.toBeInstanceOf(EtcdLeaseInvalidError);
  });

  it('lists leases', async () => {
    const lease = client.lease(30);
    const id = await lease.grant();
    const list = await client.leaseClient.leaseLeases({});
    expect(list.leases.map((l) => l.ID)).toContain(id);
    await lease.revoke();
  });
});

describe('watch', () => {
  async function watcherFor(build: (w: ReturnType<Etcd3['watch']>) => ReturnType<Etcd3['watch']>): Promise<{
    w: Watcher;
    events: string[];
  }> {
    const events: string[] = [];
    const w = await withTimeout('watch create', build(client.watch()).create(), 10_000);
    watchers.push(w);
    w.on('put', (kv: IKeyValue, prev?: IKeyValue) =>
      events.push(`put ${kv.key.toString()}=${kv.value.toString()}${prev ? ` prev=${prev.value.toString()}` : ''}`),
    );
    w.on('delete', (kv: IKeyValue) => events.push(`delete ${kv.key.toString()}`));
    return { w, events };
  }

  it('delivers put and delete events for a key', async () => {
    const { w, events } = await watcherFor((b) => b.key('nw/k'));
    await client.put('nw/k').value('1');
    await client.put('nw/other').value('x');
    await client.delete().key('nw/k');
    await waitFor('2 events', () => events.length >= 2);
    expect(events).toEqual(['put nw/k=1', 'delete nw/k']);
    await w.cancel();
  });

  it('delivers events for a prefix, with previous values', async () => {
    const { w, events } = await watcherFor((b) => b.prefix('nwp/').withPreviousKV());
    await client.put('nwp/a').value('1');
    await client.put('nwp/a').value('2');
    await client.put('nwx').value('outside');
    await client.put('nwp/b').value('3');
    await waitFor('3 events', () => events.length >= 3);
    expect(events).toEqual(['put nwp/a=1', 'put nwp/a=2 prev=1', 'put nwp/b=3']);
    await w.cancel();
  });

  it('replays history from startRevision', async () => {
    const p1 = await client.put('nwr/k').value('h1').exec();
    await client.put('nwr/k').value('h2');
    await client.delete().key('nwr/k');
    const { w, events } = await watcherFor((b) => b.key('nwr/k').startRevision(p1.header.revision));
    await waitFor('3 replayed events', () => events.length >= 3);
    expect(events).toEqual(['put nwr/k=h1', 'put nwr/k=h2', 'delete nwr/k']);
    await client.put('nwr/k').value('live');
    await waitFor('live event after replay', () => events.length >= 4);
    expect(events[3]).toBe('put nwr/k=live');
    await w.cancel();
  });
});

describe('concurrency helpers', () => {
  it('runs STM transactions that conflict and retry to a consistent result', async () => {
    await client.put('ns/counter').value('0');
    const writers = 5;
    await withTimeout(
      'stm increments',
      Promise.all(
        Array.from({ length: writers }, () =>
          client.stm({ retries: 50 }).transact(async (tx) => {
            const v = Number(await tx.get('ns/counter').string());
            await tx.put('ns/counter').value(String(v + 1));
          }),
        ),
      ),
      30_000,
    );
    expect(await client.get('ns/counter').string()).toBe(String(writers));
  });

  it('gives a lock to one holder at a time', async () => {
    const first = client.lock('nlock/res').ttl(10);
    await first.acquire();
    const second = client.lock('nlock/res').ttl(10);
    await expect(second.acquire()).rejects.toBeInstanceOf(EtcdLockFailedError);
    await first.release();
    await second.acquire();
    await second.release();
    expect(await client.getAll().prefix('nlock/').keys()).toEqual([]);
  });
});

describe('errors', () => {
  it('reading a compacted revision fails with the typed out-of-range error and etcd text', async () => {
    const p1 = await client.put('ne/k').value('a').exec();
    const p2 = await client.put('ne/k').value('b').exec();
    await client.kv.compact({ revision: p2.header.revision, physical: true });
    const err = await client.get('ne/k').revision(p1.header.revision).string().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(GRPCOutOfRangeError);
    expect((err as Error).message).toContain('etcdserver: mvcc: required revision has been compacted');
    expect(await client.get('ne/k').revision(p2.header.revision).string()).toBe('b');

    const future = await client.get('ne/k').revision(String((await currentRevision()) + 100)).string().catch((e: unknown) => e);
    expect(future).toBeInstanceOf(GRPCOutOfRangeError);
    expect((future as Error).message).toContain('etcdserver: mvcc: required revision is a future revision');
  });

  it('a put with an unknown lease fails with the typed lease error', async () => {
    const err = await client.put('ne/l').value('v').lease('123456789').exec().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(EtcdLeaseInvalidError);
  });
});
