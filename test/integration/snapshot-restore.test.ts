// Backup and restore as an etcd operator does it: `etcdctl snapshot save` (the real etcdctl 3.4)
// from a running member, `etcdutl snapshot status`, `etcdutl snapshot restore` into new data
// directories, and a new cluster started from them serving exactly what the snapshot held.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Cluster, type ClusterMember } from '../helpers/cluster';
import { REPO_ROOT, startEtcd, type EtcdMember } from '../helpers/etcd-process';
import { BackgroundEtcdctl, etcdctl, runProcess, type RunResult } from '../helpers/etcdctl';

const ETCDUTL = path.join(REPO_ROOT, 'bin', 'etcdutl');
const REFERENCE_BIN = '/usr/bin/etcd';

async function ctl(endpoint: string, args: string[]): Promise<string> {
  const r = await etcdctl(args, { endpoint });
  if (r.code !== 0) throw new Error(`etcdctl ${args.join(' ')} failed (${r.code}): ${r.stderr}`);
  return r.stdout;
}

function etcdutl(args: string[]): Promise<RunResult> {
  return runProcess(ETCDUTL, args, { timeoutMs: 30_000 });
}

interface KvJson {
  key: string;
  value?: string;
  create_revision: number;
  mod_revision: number;
  version: number;
  lease?: number;
}

async function allKvs(endpoint: string, extra: string[] = []): Promise<{ revision: number; kvs: KvJson[] }> {
  const j = JSON.parse(await ctl(endpoint, ['get', '', '--prefix', '-w', 'json', ...extra])) as { header: { revision: number }; kvs?: KvJson[] };
  return { revision: j.header.revision, kvs: j.kvs ?? [] };
}

function restoreInto(file: string, m: ClusterMember, initialCluster: string, token: string, extra: string[] = []): void {
  fs.rmSync(m.dataDir, { recursive: true, force: true });
  execFileSync(
    ETCDUTL,
    ['snapshot', 'restore', file, `--data-dir=${m.dataDir}`, `--name=${m.name}`, `--initial-cluster=${initialCluster}`, `--initial-cluster-token=${token}`, `--initial-advertise-peer-urls=${m.peerUrl}`, ...extra],
    { stdio: ['ignore', 'ignore', 'pipe'], timeout: 30_000 },
  );
}

/** `count` keys k00000.. put in txns of 100 (enough records for several bbolt pages). */
async function putNumberedKeys(endpoint: string, count: number): Promise<void> {
  for (let first = 0; first < count; first += 100) {
    const ops = Array.from({ length: Math.min(100, count - first) }, (_, i) => `put k${String(first + i).padStart(5, '0')} "value-${first + i}"`);
    const r = await etcdctl(['txn'], { endpoint, input: `\n${ops.join('\n')}\n\n\n` });
    expect(r.code, r.stderr).toBe(0);
  }
}

/** root (password rootpw) and alice (alicepw, read-write on [k0, k1) and `aliceAlso`), then auth enable. */
async function enableAuthWithAlice(endpoint: string, aliceAlso: string[][] = []): Promise<void> {
  for (const args of [
    ['user', 'add', 'root:rootpw'],
    ['role', 'add', 'root'],
    ['user', 'grant-role', 'root', 'root'],
    ['user', 'add', 'alice:alicepw'],
    ['role', 'add', 'r1'],
    ['role', 'grant-permission', 'r1', 'readwrite', 'k0', 'k1'],
    ...aliceAlso.map((a) => ['role', 'grant-permission', 'r1', ...a]),
    ['user', 'grant-role', 'alice', 'r1'],
    ['auth', 'enable'],
  ]) {
    await ctl(endpoint, args);
  }
}

/** What `etcdctl watch --prefix "" --rev=<rev> --prev-kv` prints of history, up to the event that ends with `last`. */
async function watchHistory(endpoint: string, auth: string[], rev: number, last: string): Promise<string> {
  const w = new BackgroundEtcdctl([...auth, 'watch', '--prefix', '', `--rev=${rev}`, '--prev-kv'], { endpoint, maxLifetimeMs: 30_000 });
  try {
    await w.waitForOutput(new RegExp(last.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')), 15_000);
    return w.stdout();
  } finally {
    w.stop();
  }
}

describe('etcdutl snapshot restore', () => {
  let dir = '';
  let source: EtcdMember;
  let file = '';
  let atSnapshot: { revision: number; kvs: KvJson[] };
  let leaseHex = '';
  let compactedRev = 0;
  let sourceClusterId = '';
  const clusters: Cluster[] = [];

  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'etcdutl-restore-'));
    source = await startEtcd();
    const ep = source.clientHostPort;
    await ctl(ep, ['put', 'old', 'gone-by-compaction']);
    compactedRev = Number(/"revision":(\d+)/.exec(await ctl(ep, ['put', 'old', 'o2', '-w', 'json']))![1]);
    await ctl(ep, ['compaction', String(compactedRev)]);
    for (const k of ['a', 'b', 'c', 'dir/x', 'dir/y']) await ctl(ep, ['put', k, `value-of-${k}`]);
    await ctl(ep, ['put', 'a', 'a-again']);
    await ctl(ep, ['del', 'b']);
    leaseHex = /lease ([0-9a-f]+) granted/.exec(await ctl(ep, ['lease', 'grant', '3600']))![1];
    await ctl(ep, ['put', 'leased', 'lv', `--lease=${leaseHex}`]);
    await ctl(ep, ['user', 'add', 'alice:secret']);
    await ctl(ep, ['role', 'add', 'reader']);
    atSnapshot = await allKvs(ep);
    sourceClusterId = String((JSON.parse(await ctl(ep, ['endpoint', 'status', '-w', 'json'])) as Array<{ Status: { header: { cluster_id: number } } }>)[0].Status.header.cluster_id);
    file = path.join(dir, 'backup.db');
    expect(await ctl(ep, ['snapshot', 'save', file])).toBe(`Snapshot saved at ${file}\n`);
    // Written after the snapshot: a restore must not have it.
    await ctl(ep, ['put', 'after-snapshot', 'x']);
  });

  afterAll(async () => {
    for (const c of clusters) await c.close();
    await source?.stop();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  it('reports the snapshot: revision, records, size', async () => {
    const r = await etcdutl(['snapshot', 'status', file, '-w', 'json']);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const st = JSON.parse(r.stdout) as { hash: number; revision: number; totalKey: number; totalSize: number; version: string };
    expect(st.revision).toBe(atSnapshot.revision);
    expect(st.totalSize).toBe(fs.statSync(file).size - 32);
    expect(st.totalKey).toBeGreaterThanOrEqual(atSnapshot.kvs.length);
    // The file is etcd's format (bbolt) without a storage version, as etcd 3.4 and 3.5 write it.
    expect(st.version).toBe('');
    const simple = await etcdutl(['snapshot', 'status', file]);
    expect(simple.stdout).toMatch(new RegExp(`^${st.hash.toString(16)}, ${st.revision}, ${st.totalKey}, \\d+ kB, \n$`));
    const table = (await etcdutl(['snapshot', 'status', file, '--write-out=table'])).stdout.split('\n');
    expect(table[1]).toMatch(/^\| +HASH +\| REVISION \| TOTAL KEYS \| TOTAL SIZE \| VERSION \|$/);
    expect(table[3]).toMatch(new RegExp(`^\\| +${st.hash.toString(16)} \\| +${st.revision} \\| +${st.totalKey} \\| +\\d+ kB \\| +\\|$`));
    // etcd's own tool reads the same file and agrees.
    const theirs = JSON.parse((await runProcess('/usr/bin/etcdctl', ['snapshot', 'status', file, '-w', 'json'], { timeoutMs: 15_000 })).stdout) as Record<string, number>;
    expect(theirs).toEqual({ hash: st.hash, revision: st.revision, totalKey: st.totalKey, totalSize: st.totalSize });
  });

  it('starts a new 3-member cluster from it with every key, revision, lease and user, and nothing written after', async () => {
    const c = await Cluster.start({ size: 3, beforeLaunch: (m, initial, token) => restoreInto(file, m, initial, token) });
    clusters.push(c);
    const leader = await c.waitLeader();
    for (const m of c.members) {
      const got = await allKvs(m.clientHostPort, ['--consistency=s']);
      expect(got).toEqual(atSnapshot);
    }
    const ep = leader.clientHostPort;
    expect(await ctl(ep, ['lease', 'list'])).toBe(`found 1 leases\n${leaseHex}\n`);
    expect(await ctl(ep, ['user', 'list'])).toBe('alice\n');
    expect(await ctl(ep, ['role', 'list'])).toBe('reader\n');
    const members = (JSON.parse(await ctl(ep, ['member', 'list', '-w', 'json'])) as { header: { cluster_id: number }; members: Array<{ name?: string; peerURLs: string[] }> });
    expect(members.members.map((m) => m.peerURLs[0]).sort()).toEqual(c.members.map((m) => m.peerUrl).sort());
    expect(String(members.header.cluster_id)).not.toBe(sourceClusterId);
    // History before the snapshot's compaction stays compacted; new writes continue its revisions.
    const r = await etcdctl(['get', 'old', `--rev=${compactedRev - 1}`], { endpoint: ep });
    expect(r.stderr.trim().split('\n').pop()).toBe('Error: etcdserver: mvcc: required revision has been compacted');
    expect(await ctl(ep, ['put', 'new', 'n', '-w', 'json'])).toMatch(new RegExp(`"revision":${atSnapshot.revision + 1}[,}]`));
    // A restored member restarts from its own log after a crash.
    const other = c.members.find((m) => m !== leader)!;
    await other.kill9();
    other.relaunch();
    await other.waitReady(30_000);
    await c.waitConverged();
    const after = await allKvs(other.clientHostPort, ['--consistency=s']);
    expect(after.revision).toBe(atSnapshot.revision + 1);
    expect(after.kvs.map((kv) => Buffer.from(kv.key, 'base64').toString())).toContain('new');
  });

  it('keeps the WAL in --wal-dir when asked', async () => {
    const walDir = path.join(dir, 'separate-wal');
    const c = await Cluster.start({
      size: 1,
      args: [`--wal-dir=${walDir}`],
      beforeLaunch: (m, initial, token) => restoreInto(file, m, initial, token, [`--wal-dir=${walDir}`]),
    });
    clusters.push(c);
    const m = c.members[0];
    await ctl(m.clientHostPort, ['put', 'in-wal-dir', '1']);
    expect(fs.readdirSync(walDir).some((f) => f.endsWith('.wal'))).toBe(true);
    expect(fs.existsSync(path.join(m.dataDir, 'member', 'wal'))).toBe(false);
    await m.kill9();
    m.relaunch();
    await m.waitReady(30_000);
    const got = await allKvs(m.clientHostPort);
    expect(got.revision).toBe(atSnapshot.revision + 1);
  });

  it('raises the revision and compacts below it with --bump-revision --mark-compacted (what Kubernetes asks of a restore)', async () => {
    const bump = 1_000_000;
    const c = await Cluster.start({
      size: 1,
      beforeLaunch: (m, initial, token) => restoreInto(file, m, initial, token, [`--bump-revision=${bump}`, '--mark-compacted']),
    });
    clusters.push(c);
    const ep = c.members[0].clientHostPort;
    const got = await allKvs(ep);
    expect(got.revision).toBe(atSnapshot.revision + bump);
    expect(got.kvs).toEqual(atSnapshot.kvs);
    const old = await etcdctl(['get', 'a', `--rev=${atSnapshot.revision}`], { endpoint: ep });
    expect(old.stderr.trim().split('\n').pop()).toBe('Error: etcdserver: mvcc: required revision has been compacted');
    const status = JSON.parse(await ctl(ep, ['put', 'a', 'after-bump', '-w', 'json'])) as { header: { revision: number } };
    expect(status.header.revision).toBe(atSnapshot.revision + bump + 1);
    const r = await etcdutl(['snapshot', 'restore', file, `--data-dir=${path.join(dir, 'd-bump')}`, '--bump-revision=5']);
    expect(r.code).toBe(1);
    expect(r.stderr).toBe('Error: --mark-compacted required if --revision-bump > 0\n');
  });

  it('refuses what etcd refuses, in its words', async () => {
    const target = (n: string): string => path.join(dir, n);
    const base = ['--name=m', '--initial-cluster=m=http://127.0.0.1:1', '--initial-advertise-peer-urls=http://127.0.0.1:1'];

    const corrupt = target('corrupt.db');
    const bytes = fs.readFileSync(file);
    bytes[100] ^= 0xff;
    fs.writeFileSync(corrupt, bytes);
    let r = await etcdutl(['snapshot', 'restore', corrupt, `--data-dir=${target('d-corrupt')}`, ...base]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^Error: expected sha256 \[[0-9 ]+\], got \[[0-9 ]+\]\n$/m);
    expect(fs.existsSync(target('d-corrupt'))).toBe(false);

    const bare = target('bare.db');
    fs.writeFileSync(bare, fs.readFileSync(file).subarray(0, fs.statSync(file).size - 32));
    r = await etcdutl(['snapshot', 'restore', bare, `--data-dir=${target('d-bare')}`, ...base]);
    expect(r.stderr).toMatch(/^Error: snapshot missing hash but --skip-hash-check=false\n$/m);
    r = await etcdutl(['snapshot', 'restore', bare, `--data-dir=${target('d-bare')}`, '--skip-hash-check', ...base]);
    expect(r.code).toBe(0);

    r = await etcdutl(['snapshot', 'restore', file, `--data-dir=${target('d-bare')}`, ...base]);
    expect(r.stderr).toMatch(new RegExp(`^Error: data-dir "${target('d-bare')}" exists\\n$`, 'm'));

    r = await etcdutl(['snapshot', 'restore', file, `--data-dir=${target('d-name')}`, '--name=nobody', '--initial-cluster=m=http://127.0.0.1:1']);
    expect(r.stderr).toMatch(/^Error: couldn't find local name "nobody" in the initial cluster configuration\n$/m);

    r = await etcdutl(['snapshot', 'status', target('missing.db')]);
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(`Error: stat ${target('missing.db')}: no such file or directory\n`);
  });

});

describe('a snapshot of etcd itself (etcd 3.4, bbolt): the way over to etcd-ts', () => {
  let dir = '';
  let file = '';
  let atSnapshot: { revision: number; kvs: KvJson[] };
  let compactedRev = 0;
  let leaseHex = '';
  let etcdHistory = '';
  const clusters: Cluster[] = [];
  const ROOT = ['--user=root:rootpw'];

  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'etcdutl-bbolt-'));
    const ref = await startEtcd({ bin: REFERENCE_BIN });
    try {
      const ep = ref.clientHostPort;
      // Enough records for branch pages, values past a page (overflow pages), history, a compaction.
      await putNumberedKeys(ep, 2000);
      await ctl(ep, ['put', 'big1', 'x'.repeat(9000)]);
      await ctl(ep, ['put', 'big2', 'y'.repeat(20000)]);
      await ctl(ep, ['put', 'k00001', 'second']);
      await ctl(ep, ['del', 'k00002']);
      compactedRev = Number(/"revision":(\d+)/.exec(await ctl(ep, ['put', 'k00003', 'third', '-w', 'json']))![1]);
      await ctl(ep, ['compaction', String(compactedRev)]);
      leaseHex = /lease ([0-9a-f]+) granted/.exec(await ctl(ep, ['lease', 'grant', '5000']))![1];
      await ctl(ep, ['put', 'leased', 'lv', `--lease=${leaseHex}`]);
      await enableAuthWithAlice(ep, [['read', '--prefix', 'big']]);
      atSnapshot = await allKvs(ep, ROOT);
      etcdHistory = await watchHistory(ep, ROOT, compactedRev, 'leased\nlv\n');
      file = path.join(dir, 'etcd.db');
      await ctl(ep, [...ROOT, 'snapshot', 'save', file]);
    } finally {
      await ref.stop();
    }
  });

  afterAll(async () => {
    for (const c of clusters) await c.close();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  it('reads its status as etcdctl does', async () => {
    const theirs = JSON.parse(await runProcess('/usr/bin/etcdctl', ['snapshot', 'status', file, '-w', 'json'], { timeoutMs: 15_000 }).then((r) => r.stdout)) as Record<string, number>;
    const r = await etcdutl(['snapshot', 'status', file, '-w', 'json']);
    expect(r.stderr).toBe('');
    const ours = JSON.parse(r.stdout) as Record<string, number | string>;
    expect({ hash: ours['hash'], revision: ours['revision'], totalKey: ours['totalKey'], totalSize: ours['totalSize'] }).toEqual(theirs);
  });

  it('restores into a 3-member cluster of ours: every revision of every key, compaction, lease, users with their etcd passwords, roles, auth on', async () => {
    // Auth is on from the start: Status, as etcd 3.6 answers it, needs a user.
    const c = await Cluster.start({
      size: 3,
      beforeLaunch: (m, initial, token) => restoreInto(file, m, initial, token),
      statusUser: { name: 'root', password: 'rootpw' },
    });
    clusters.push(c);
    const leader = await c.waitLeader();
    for (const m of c.members) expect(await allKvs(m.clientHostPort, [...ROOT, '--consistency=s'])).toEqual(atSnapshot);
    const ep = leader.clientHostPort;
    // History kept by etcd's compaction is there, what it dropped is compacted.
    expect(await ctl(ep, [...ROOT, 'get', 'k00003', `--rev=${compactedRev}`, '--print-value-only'])).toBe('third\n');
    const old = await etcdctl([...ROOT, 'get', 'k00003', `--rev=${compactedRev - 1}`], { endpoint: ep });
    expect(old.stderr.trim().split('\n').pop()).toBe('Error: etcdserver: mvcc: required revision has been compacted');
    expect(await ctl(ep, [...ROOT, 'lease', 'list'])).toBe(`found 1 leases\n${leaseHex}\n`);
    // A watch replaying history from the compaction point sees what it saw on etcd (no prev_kv for
    // the first event: its previous value is compacted away on both).
    expect(etcdHistory).toBe('PUT\nk00003\nthird\nPUT\nleased\nlv\n');
    expect(await watchHistory(ep, ROOT, compactedRev, 'leased\nlv\n')).toBe(etcdHistory);
    // etcd's bcrypt hashes verify; permissions hold.
    expect(await ctl(ep, ['--user=alice:alicepw', 'get', 'k00005', '--print-value-only'])).toBe('value-5\n');
    const denied = await etcdctl(['--user=alice:alicepw', 'put', 'zz', 'v'], { endpoint: ep });
    expect(denied.stderr.trim().split('\n').pop()).toBe('Error: etcdserver: permission denied');
    const wrong = await etcdctl(['--user=alice:wrong', 'get', 'k00005'], { endpoint: ep });
    expect(wrong.stderr.trim().split('\n').pop()).toBe('Error: etcdserver: authentication failed, invalid user ID or password');
    expect(await ctl(ep, ['--user=alice:alicepw', 'put', 'k00005', 'mine', '-w', 'json'])).toMatch(new RegExp(`"revision":${atSnapshot.revision + 1}[,}]`));
  });
});

describe('etcdutl defrag', () => {
  it('refuses a data directory a server is using; once it stopped, gives back the space deleted keys left, and the server starts on it', async () => {
    const m = await startEtcd();
    try {
      const ep = m.clientHostPort;
      for (let batch = 0; batch < 10; batch++) {
        const ops = Array.from({ length: 100 }, (_, i) => `put big${batch * 100 + i} ${'v'.repeat(2000)}`);
        const r = await etcdctl(['txn'], { endpoint: ep, input: `\n${ops.join('\n')}\n\n\n` });
        expect(r.code, r.stderr).toBe(0);
      }
      await ctl(ep, ['del', '--prefix', 'big']);
      const rev = Number(/"revision":(\d+)/.exec(await ctl(ep, ['put', 'kept', 'yes', '-w', 'json']))![1]);
      await ctl(ep, ['compaction', '--physical', String(rev)]);
      const db = path.join(m.dataDir, 'member', 'snap', 'db');
      let r = await etcdutl(['defrag', `--data-dir=${m.dataDir}`]);
      expect(r.code).toBe(1);
      expect(r.stderr).toBe(`Error: Failed to defragment etcd data[${m.dataDir}] (the data directory is in use by a running server)\n`);
      await m.stop();
      const before = fs.statSync(db).blocks * 512;
      r = await etcdutl(['defrag', `--data-dir=${m.dataDir}`]);
      expect(r.stderr).toBe('');
      expect(r.code).toBe(0);
      const after = fs.statSync(db).blocks * 512;
      expect(after).toBeLessThan(before / 4);
      await m.restart();
      expect(await ctl(ep, ['get', 'kept', '--print-value-only'])).toBe('yes\n');
      expect(await ctl(ep, ['get', '--prefix', 'big', '--keys-only'])).toBe('');
    } finally {
      await m.stop();
    }
  });
});

describe('etcdutl version', () => {
  it('prints the version it reports, as etcdutl does', async () => {
    const r = await etcdutl(['version']);
    expect(r.stdout).toBe('etcdutl version: 3.6.14\nAPI version: 3.6\n');
  });
});

describe('a snapshot of ours in etcd itself (etcdctl 3.4 and etcd 3.4)', () => {
  it("is read by etcdctl's snapshot status and restore, and etcd 3.4 serves it: keys, revisions, leases, users with their passwords", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'etcd-back-'));
    const ours = await startEtcd();
    let ref: EtcdMember | null = null;
    try {
      const ep = ours.clientHostPort;
      await putNumberedKeys(ep, 1000);
      await ctl(ep, ['put', 'big', 'z'.repeat(30000)]);
      await ctl(ep, ['del', 'k00010']);
      const compactTo = Number(/"revision":(\d+)/.exec(await ctl(ep, ['put', 'k00011', 'again', '-w', 'json']))![1]);
      await ctl(ep, ['compaction', String(compactTo)]);
      const leaseHex = /lease ([0-9a-f]+) granted/.exec(await ctl(ep, ['lease', 'grant', '3000']))![1];
      await ctl(ep, ['put', 'leased', 'lv', `--lease=${leaseHex}`]);
      await enableAuthWithAlice(ep);
      const ROOT = ['--user=root:rootpw'];
      const before = await allKvs(ep, ROOT);
      const file = path.join(dir, 'ours.db');
      await ctl(ep, [...ROOT, 'snapshot', 'save', file]);

      const theirs = JSON.parse((await runProcess('/usr/bin/etcdctl', ['snapshot', 'status', file, '-w', 'json'], { timeoutMs: 15_000 })).stdout) as Record<string, number>;
      expect(theirs['revision']).toBe(before.revision);
      const mine = JSON.parse((await etcdutl(['snapshot', 'status', file, '-w', 'json'])).stdout) as Record<string, number>;
      expect({ hash: mine['hash'], revision: mine['revision'], totalKey: mine['totalKey'], totalSize: mine['totalSize'] }).toEqual(theirs);

      const restored = path.join(dir, 'etcd-restored');
      const r = await runProcess('/usr/bin/etcdctl', ['snapshot', 'restore', file, `--data-dir=${restored}`], { timeoutMs: 30_000 });
      expect(r.code, r.stderr).toBe(0);
      ref = await startEtcd({ bin: REFERENCE_BIN, dataDir: restored, name: 'default' });
      const rep = ref.clientHostPort;
      expect(await allKvs(rep, ROOT)).toEqual(before);
      const old = await etcdctl([...ROOT, 'get', 'k00011', `--rev=${compactTo - 1}`], { endpoint: rep });
      expect(old.stderr.trim().split('\n').pop()).toBe('Error: etcdserver: mvcc: required revision has been compacted');
      expect(await ctl(rep, [...ROOT, 'lease', 'list'])).toBe(`found 1 leases\n${leaseHex}\n`);
      expect(await ctl(rep, ['--user=alice:alicepw', 'get', 'k00005', '--print-value-only'])).toBe('value-5\n');
      const denied = await etcdctl(['--user=alice:alicepw', 'get', 'big'], { endpoint: rep });
      expect(denied.stderr.trim().split('\n').pop()).toBe('Error: etcdserver: permission denied');
    } finally {
      await ref?.stop();
      await ours.stop();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('a data directory of etcd itself', () => {
  /** Every file under `dir` with the sha256 of its bytes. */
  function fingerprint(dir: string): Record<string, string> {
    const out: Record<string, string> = {};
    const walk = (d: string): void => {
      for (const e of fs.readdirSync(d, { withFileTypes: true })) {
        const p = path.join(d, e.name);
        if (e.isDirectory()) walk(p);
        else out[path.relative(dir, p)] = createHash('sha256').update(fs.readFileSync(p)).digest('hex');
      }
    };
    walk(dir);
    return out;
  }

  it('is refused with a message saying what to do, and left byte for byte as it was', async () => {
    const ref = await startEtcd({ bin: REFERENCE_BIN });
    await ctl(ref.clientHostPort, ['put', 'k', 'v']);
    await ref.stop();
    const before = fingerprint(ref.dataDir);
    expect(Object.keys(before).some((f) => f.endsWith('.wal'))).toBe(true);
    const ours = (): Promise<RunResult> => runProcess(path.join(REPO_ROOT, 'bin', 'etcd'), [`--data-dir=${ref.dataDir}`, '--listen-client-urls=http://127.0.0.1:0', '--advertise-client-urls=http://127.0.0.1:2379', '--listen-peer-urls=http://127.0.0.1:0'], { timeoutMs: 30_000 });
    let r = await ours();
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('is a WAL segment of etcd itself, not of etcd-ts');
    expect(r.stderr).toContain('etcdutl snapshot restore');
    expect(fingerprint(ref.dataDir)).toEqual(before);

    // Without its WAL, the bbolt database is recognised too (LMDB would crash on it).
    for (const f of Object.keys(before).filter((x) => x.endsWith('.wal'))) fs.rmSync(path.join(ref.dataDir, f));
    const withoutWal = fingerprint(ref.dataDir);
    r = await ours();
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('is a bbolt database of etcd itself, not of etcd-ts');
    expect(fingerprint(ref.dataDir)).toEqual(withoutWal);
  });
});
