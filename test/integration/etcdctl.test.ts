// The real etcdctl (3.4) against the server under test: what an operator types and reads.
// Run against the real etcd with ETCD_BIN=/usr/bin/etcd.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BackgroundEtcdctl, etcdctl, RunResult } from '../helpers/etcdctl';
import { EtcdMember, startEtcd } from '../helpers/etcd-process';
import { parseGoJson } from '../helpers/json';
import { waitFor } from '../helpers/wait';

let m: EtcdMember;
const background: BackgroundEtcdctl[] = [];

beforeAll(async () => {
  m = await startEtcd();
});
afterAll(async () => {
  for (const b of background) b.stop();
  await m?.stop();
});

function run(args: string[], input?: string): Promise<RunResult> {
  return etcdctl(args, { endpoint: m.clientHostPort, input });
}
/** Run, expect exit 0, return stdout. */
async function ok(args: string[], input?: string): Promise<string> {
  const r = await run(args, input);
  if (r.code !== 0) throw new Error(`etcdctl ${args.join(' ')} exited ${r.code}: ${r.stderr}\n${m.logs().slice(-3000)}`);
  return r.stdout;
}
/** Run, expect a non-zero exit, return stderr's `Error: ...` line. */
async function fails(args: string[]): Promise<string> {
  const r = await run(args);
  expect(r.code, `etcdctl ${args.join(' ')} should fail; stdout ${r.stdout}`).not.toBe(0);
  const line = r.stderr.split('\n').find((l) => l.startsWith('Error:'));
  return line ?? r.stderr;
}
async function putRev(key: string, value: string, extra: string[] = []): Promise<number> {
  const out = await ok(['put', key, value, ...extra, '-w', 'json']);
  return Number(parseGoJson<{ header: { revision: number } }>(out).header.revision);
}
const b64 = (s: string): string => Buffer.from(s).toString('base64');

interface GetJson {
  header: { cluster_id: string; member_id: string; revision: number; raft_term: number };
  kvs?: { key: string; value?: string; create_revision: number; mod_revision: number; version: number; lease?: string | number }[];
  count?: number;
  more?: boolean;
}

describe('put and get', () => {
  it('puts and reads a key back in the simple and value-only formats', async () => {
    expect(await ok(['put', 'pg/one', 'v1'])).toBe('OK\n');
    expect(await ok(['get', 'pg/one'])).toBe('pg/one\nv1\n');
    expect(await ok(['get', 'pg/one', '--print-value-only'])).toBe('v1\n');
    expect(await ok(['get', 'pg/missing'])).toBe('');
  });

  it('prints the previous pair with put --prev-kv and keeps the value with --ignore-value', async () => {
    await ok(['put', 'pv/k', 'v1']);
    expect(await ok(['put', 'pv/k', 'v2', '--prev-kv'])).toBe('OK\npv/k\nv1\n');
    expect(await ok(['put', 'pv/k', '--ignore-value'])).toBe('OK\n');
    expect(await ok(['get', 'pv/k', '--print-value-only'])).toBe('v2\n');
    expect(await fails(['put', 'pv/none', '--ignore-value'])).toBe('Error: etcdserver: key not found');
    expect(await fails(['put', '', 'v'])).toBe('Error: etcdserver: key is not provided');
  });

  it('runs a command under a lock', async () => {
    expect(await ok(['lock', 'ctl-lock', 'echo', 'held'])).toBe('held\n');
    // The lock key is released (deleted) afterwards.
    expect(await ok(['get', 'ctl-lock', '--prefix', '--keys-only'])).toBe('');
  });

  it('gets by prefix, by [key, range_end) and from-key', async () => {
    for (const k of ['r/a', 'r/b', 'r/c', 'r0']) await ok(['put', k, `val-${k}`]);
    expect(await ok(['get', 'r/', '--prefix'])).toBe('r/a\nval-r/a\nr/b\nval-r/b\nr/c\nval-r/c\n');
    expect(await ok(['get', 'r/a', 'r/c'])).toBe('r/a\nval-r/a\nr/b\nval-r/b\n');
    expect(await ok(['get', 'r/c', '--from-key', '--keys-only', '--limit=2'])).toBe('r/c\n\nr0\n\n');
  });

  it('reads an older revision with --rev', async () => {
    const rev1 = await putRev('rev/k', 'first');
    const rev2 = await putRev('rev/k', 'second');
    expect(rev2).toBe(rev1 + 1);
    expect(await ok(['get', 'rev/k', `--rev=${rev1}`])).toBe('rev/k\nfirst\n');
    expect(await ok(['get', 'rev/k', `--rev=${rev2}`])).toBe('rev/k\nsecond\n');
    expect(await ok(['get', 'rev/k', `--rev=${rev1 - 1}`])).toBe('');
  });

  it('limits, sorts and orders', async () => {
    // Written in an order that differs from key order and value order.
    await ok(['put', 'so/b', '3']);
    await ok(['put', 'so/c', '1']);
    await ok(['put', 'so/a', '2']);
    await ok(['put', 'so/c', '4']); // so/c: version 2, newest mod revision
    const keys = async (...flags: string[]): Promise<string> =>
      (await ok(['get', 'so/', '--prefix', '--keys-only', ...flags])).split('\n').filter((l) => l !== '').join(',');
    expect(await keys()).toBe('so/a,so/b,so/c');
    expect(await keys('--limit=2')).toBe('so/a,so/b');
    expect(await keys('--order=DESCEND')).toBe('so/c,so/b,so/a');
    expect(await keys('--sort-by=MODIFY', '--order=DESCEND')).toBe('so/c,so/a,so/b');
    expect(await keys('--sort-by=CREATE')).toBe('so/b,so/c,so/a');
    expect(await keys('--sort-by=VALUE')).toBe('so/a,so/b,so/c');
    expect(await keys('--sort-by=VALUE', '--order=DESCEND')).toBe('so/c,so/b,so/a');
    expect(await keys('--sort-by=VERSION', '--order=DESCEND', '--limit=1')).toBe('so/c');
    expect(await keys('--sort-by=KEY', '--order=DESCEND', '--limit=2')).toBe('so/c,so/b');

    const j = parseGoJson<GetJson>(await ok(['get', 'so/', '--prefix', '--limit=2', '-w', 'json']));
    expect(j.count).toBe(3);
    expect(j.more).toBe(true);
    expect(j.kvs?.length).toBe(2);
  });

  it('prints keys only as key + empty line', async () => {
    await ok(['put', 'ko/1', 'x']);
    await ok(['put', 'ko/2', 'y']);
    expect(await ok(['get', 'ko/', '--prefix', '--keys-only'])).toBe('ko/1\n\nko/2\n\n');
  });

  it('prints the protobuf fields in -w json', async () => {
    const rev = await putRev('js/k', 'v1');
    await putRev('js/k', 'v2');
    const j = parseGoJson<GetJson>(await ok(['get', 'js/k', '-w', 'json']));
    expect(j.header.revision).toBe(rev + 1);
    expect(BigInt(j.header.cluster_id)).toBeGreaterThan(0n);
    expect(BigInt(j.header.member_id)).toBeGreaterThan(0n);
    expect(j.header.raft_term).toBeGreaterThanOrEqual(1);
    expect(j.count).toBe(1);
    expect(j.more).toBeUndefined(); // false is omitted
    expect(j.kvs).toEqual([
      { key: b64('js/k'), create_revision: rev, mod_revision: rev + 1, version: 2, value: b64('v2') },
    ]);
    // A missing key: no kvs, no count (zero values are omitted).
    const none = parseGoJson<GetJson>(await ok(['get', 'js/none', '-w', 'json']));
    expect(none.kvs).toBeUndefined();
    expect(none.count).toBeUndefined();
  });
});

describe('del', () => {
  it('deletes a prefix and prints the count', async () => {
    for (const k of ['d/1', 'd/2', 'd/3']) await ok(['put', k, 'x']);
    expect(await ok(['del', 'd/', '--prefix'])).toBe('3\n');
    expect(await ok(['get', 'd/', '--prefix'])).toBe('');
    expect(await ok(['del', 'd/none'])).toBe('0\n');
  });

  it('prints the deleted pairs with --prev-kv', async () => {
    await ok(['put', 'dp/a', '1']);
    await ok(['put', 'dp/b', '2']);
    expect(await ok(['del', 'dp/', '--prefix', '--prev-kv'])).toBe('2\ndp/a\n1\ndp/b\n2\n');
  });
});

describe('txn (interactive)', () => {
  const prompts = 'compares:\nsuccess requests (get, put, del):\nfailure requests (get, put, del):\n';

  it('runs the success branch when value and version compares hold', async () => {
    await ok(['put', 'tx/a', '1']);
    const out = await ok(['txn', '-i'], 'value("tx/a") = "1"\nversion("tx/a") = "1"\n\nput tx/a 2\nput tx/b x\n\nput tx/c fail\n\n');
    expect(out).toBe(`${prompts}SUCCESS\n\nOK\n\nOK\n`);
    expect(await ok(['get', 'tx/', '--prefix'])).toBe('tx/a\n2\ntx/b\nx\n');
  });

  it('runs the failure branch on a failing create-revision compare, with a get in it', async () => {
    const out = await ok(['txn', '-i'], 'create("tx/a") > "100000"\n\nput tx/a 3\n\nput tx/f f\nget tx/a\n\n');
    expect(out).toBe(`${prompts}FAILURE\n\nOK\n\ntx/a\n2\n`);
    expect(await ok(['get', 'tx/f', '--print-value-only'])).toBe('f\n');
  });

  it('compares mod revision (mod of a missing key is 0)', async () => {
    const rev = Number(parseGoJson<GetJson>(await ok(['get', 'tx/a', '-w', 'json'])).kvs?.[0]?.mod_revision);
    expect(await ok(['txn', '-i'], `mod("tx/a") = "${rev}"\nmod("tx/none") = "0"\n\ndel tx/b\n\n\n`)).toBe(
      `${prompts}SUCCESS\n\n1\n`,
    );
    expect(await ok(['txn', '-i'], `mod("tx/a") < "${rev}"\n\n\n\n`)).toBe(`${prompts}FAILURE\n`);
  });
});

describe('lease', () => {
  it('grants, attaches keys, reports TTL, lists, keeps alive and revokes', async () => {
    const grant = await ok(['lease', 'grant', '60']);
    const m1 = /^lease ([0-9a-f]+) granted with TTL\(60s\)\n$/.exec(grant);
    expect(m1, grant).not.toBeNull();
    const id = m1![1]!;
    await ok(['put', 'ls/k1', 'v', `--lease=${id}`]);
    await ok(['put', 'ls/k2', 'v', `--lease=${id}`]);

    expect(await ok(['lease', 'timetolive', id])).toMatch(
      new RegExp(`^lease ${id} granted with TTL\\(60s\\), remaining\\((5\\d|60)s\\)\\n$`),
    );
    // etcd keeps a lease's keys in a map: either order.
    expect(await ok(['lease', 'timetolive', id, '--keys'])).toMatch(
      new RegExp(`^lease ${id} granted with TTL\\(60s\\), remaining\\((5\\d|60)s\\), attached keys\\(\\[(ls/k1 ls/k2|ls/k2 ls/k1)\\]\\)\\n$`),
    );
    const ttlJson = parseGoJson<{ id: string; ttl: number; 'granted-ttl': number }>(await ok(['lease', 'timetolive', id, '-w', 'json']));
    expect(BigInt(ttlJson.id)).toBe(BigInt(`0x${id}`));
    expect(ttlJson['granted-ttl']).toBe(60);

    const list = await ok(['lease', 'list']);
    expect(list).toMatch(/^found \d+ leases\n/);
    expect(list.split('\n')).toContain(id);

    expect(await ok(['lease', 'keep-alive', '--once', id])).toBe(`lease ${id} keepalived with TTL(60)\n`);

    const j = parseGoJson<GetJson>(await ok(['get', 'ls/k1', '-w', 'json']));
    expect(BigInt(j.kvs?.[0]?.lease ?? 0)).toBe(BigInt(`0x${id}`));

    expect(await ok(['lease', 'revoke', id])).toBe(`lease ${id} revoked\n`);
    expect(await ok(['get', 'ls/', '--prefix'])).toBe('');
    expect(await ok(['lease', 'timetolive', id])).toBe(`lease ${id} already expired\n`);
    expect(await fails(['lease', 'revoke', id])).toBe('Error: failed to revoke lease (etcdserver: requested lease not found)');
    expect(await fails(['put', 'ls/k3', 'v', `--lease=${id}`])).toBe('Error: etcdserver: requested lease not found');
  });

  it('expires a short lease and deletes its keys', async () => {
    const id = /^lease ([0-9a-f]+) granted/.exec(await ok(['lease', 'grant', '2']))![1]!;
    await ok(['put', 'lx/k', 'v', `--lease=${id}`]);
    // etcd expires a lease some time after its TTL (a revoke proposal); allow a bounded margin.
    await waitFor('lease expiry deletes the key', async () => (await ok(['get', 'lx/k'])) === '', {
      timeoutMs: 15_000,
      intervalMs: 250,
    });
    expect(await ok(['lease', 'timetolive', id])).toBe(`lease ${id} already expired\n`);
  });
});

describe('watch', () => {
  /** Start a watch and wait until it demonstrably receives live events. */
  async function liveWatch(args: string[], probeKey: string): Promise<BackgroundEtcdctl> {
    const w = new BackgroundEtcdctl(['watch', ...args], { endpoint: m.clientHostPort });
    background.push(w);
    let n = 0;
    let last = '';
    await waitFor('watch to be live', async () => {
      // Live once the last probe's event is printed whole (etcdctl prints an event line by line,
      // and a caller slicing the output from here must not cut one in half).
      if (last !== '' && w.stdout().endsWith(`\n${probeKey}\n${last}\n`)) return true;
      last = `probe${n++}`;
      await ok(['put', probeKey, last]);
      return false;
    }, { timeoutMs: 10_000, intervalMs: 200 });
    return w;
  }

  it('sees puts and deletes under a prefix, and nothing outside it', async () => {
    const w = await liveWatch(['wp/', '--prefix'], 'wp/probe');
    const start = w.stdout().length;
    await ok(['put', 'wp/a', '1']);
    await ok(['put', 'other', 'x']);
    await ok(['del', 'wp/a']);
    await w.waitForOutput(/DELETE\nwp\/a\n\n$/);
    expect(w.stdout().slice(start).replace(/PUT\nwp\/probe\nprobe\d+\n/g, '')).toBe('PUT\nwp/a\n1\nDELETE\nwp/a\n\n');
    w.stop();
  });

  it('prints previous values with --prev-kv', async () => {
    const w = await liveWatch(['wv/k', '--prev-kv'], 'wv/k');
    const start = w.stdout().length;
    await ok(['put', 'wv/k', 'new']);
    await ok(['del', 'wv/k']);
    await w.waitForOutput(/DELETE\nwv\/k\nnew\nwv\/k\n\n$/);
    // etcdctl prints the previous pair first, then the event's pair.
    expect(w.stdout().slice(start)).toMatch(/^PUT\nwv\/k\nprobe\d+\nwv\/k\nnew\nDELETE\nwv\/k\nnew\nwv\/k\n\n$/);
    w.stop();
  });

  it('replays history from --rev', async () => {
    const rev = await putRev('wr/k', 'h1');
    await ok(['put', 'wr/k', 'h2']);
    await ok(['del', 'wr/k']);
    const w = new BackgroundEtcdctl(['watch', 'wr/k', `--rev=${rev}`], { endpoint: m.clientHostPort });
    background.push(w);
    await w.waitForOutput(/^PUT\nwr\/k\nh1\nPUT\nwr\/k\nh2\nDELETE\nwr\/k\n\n$/);
    w.stop();
  });
});

describe('cluster and maintenance', () => {
  it('lists the member', async () => {
    expect(await ok(['member', 'list'])).toMatch(
      new RegExp(`^[0-9a-f]+, started, ${m.name}, ${m.peerUrl}, ${m.clientUrl}, false\\n$`),
    );
    const j = parseGoJson<{ header: { member_id: string }; members: { ID: string; name: string; peerURLs: string[]; clientURLs: string[] }[] }>(
      await ok(['member', 'list', '-w', 'json']),
    );
    expect(j.members).toHaveLength(1);
    expect(j.members[0]).toMatchObject({ ID: j.header.member_id, name: m.name, peerURLs: [m.peerUrl], clientURLs: [m.clientUrl] });
  });

  it('reports endpoint status and health', async () => {
    expect(await ok(['endpoint', 'status'])).toMatch(
      new RegExp(`^${m.clientHostPort}, [0-9a-f]+, 3\\.\\d+\\.\\d+, \\d+(\\.\\d+)? [kMG]?B, true, false, \\d+, \\d+, \\d+, \\n$`),
    );
    const [st] = parseGoJson<{ Endpoint: string; Status: { header: { member_id: string; revision: number }; version: string; dbSize: number; leader: string; raftIndex: number; raftTerm: number; raftAppliedIndex: number } }[]>(
      await ok(['endpoint', 'status', '-w', 'json']),
    );
    expect(st?.Endpoint).toBe(m.clientHostPort);
    expect(st?.Status.leader).toBe(st?.Status.header.member_id);
    expect(st?.Status.version).toMatch(/^3\.\d+\.\d+$/);
    expect(st?.Status.dbSize).toBeGreaterThan(0);
    expect(st?.Status.raftTerm).toBeGreaterThanOrEqual(1);
    expect(st?.Status.raftIndex).toBeGreaterThanOrEqual(st?.Status.header.revision ?? Infinity);

    const h = await run(['endpoint', 'health']);
    expect(h.code).toBe(0);
    // etcdctl 3.4 prints the health line on stderr.
    expect(h.stdout + h.stderr).toMatch(
      new RegExp(`^${m.clientHostPort} is healthy: successfully committed proposal: took = \\S+\\n$`),
    );
  });

  it('lists no alarms', async () => {
    expect(await ok(['alarm', 'list'])).toBe('');
  });

  it('hashes the key space (stable without writes, changed by a write)', async () => {
    const h1 = await ok(['endpoint', 'hashkv']);
    expect(h1).toMatch(new RegExp(`^${m.clientHostPort}, \\d+\\n$`));
    expect(await ok(['endpoint', 'hashkv'])).toBe(h1);
    await ok(['put', 'hash/k', 'v']);
    const [j] = parseGoJson<{ Endpoint: string; HashKV: { hash: number; header: { revision: number } } }[]>(
      await ok(['endpoint', 'hashkv', '-w', 'json']),
    );
    expect(j?.Endpoint).toBe(m.clientHostPort);
    expect(`${m.clientHostPort}, ${j?.HashKV.hash}\n`).not.toBe(h1);
  });

  it('saves a snapshot file', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'etcdctl-snap-'));
    try {
      const file = path.join(dir, 'snap.db');
      expect(await ok(['snapshot', 'save', file])).toBe(`Snapshot saved at ${file}\n`);
      expect(fs.statSync(file).size).toBeGreaterThan(0);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

// Last: compaction changes what the other tests could read.
describe('compaction and defragmentation', () => {
  it('compacts, then reads below the compacted revision fail with etcd text', async () => {
    const rev1 = await putRev('cp/k', 'old');
    const rev2 = await putRev('cp/k', 'new');
    expect(await ok(['compaction', String(rev2)])).toBe(`compacted revision ${rev2}\n`);
    expect(await fails(['get', 'cp/k', `--rev=${rev1}`])).toBe('Error: etcdserver: mvcc: required revision has been compacted');
    expect(await ok(['get', 'cp/k', `--rev=${rev2}`])).toBe('cp/k\nnew\n');
    expect(await fails(['compaction', String(rev1)])).toBe('Error: etcdserver: mvcc: required revision has been compacted');
    expect(await fails(['get', 'cp/k', `--rev=${rev2 + 1000}`])).toBe('Error: etcdserver: mvcc: required revision is a future revision');
    expect(await fails(['compaction', String(rev2 + 1000)])).toBe('Error: etcdserver: mvcc: required revision is a future revision');
    const w = await run(['watch', 'cp/k', `--rev=${rev1}`]);
    expect(w.stdout + w.stderr).toContain('watch was canceled (etcdserver: mvcc: required revision has been compacted)');
  });

  it('defragments and still serves reads and writes', async () => {
    expect(await ok(['defrag'])).toBe(`Finished defragmenting etcd member[${m.clientHostPort}]\n`);
    expect(await ok(['get', 'pg/one', '--print-value-only'])).toBe('v1\n');
    expect(await ok(['put', 'after/defrag', 'x'])).toBe('OK\n');
    expect(await ok(['get', 'after/defrag', '--print-value-only'])).toBe('x\n');
  });
});
