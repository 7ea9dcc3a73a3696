import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import { afterAll, describe, expect, it } from 'vitest';
import { Backend } from '../../../src/backend/backend';
import { BboltReader } from '../../../src/backend/bbolt_reader';
import { Members } from '../../../src/membership/members';
import { writeEtcdSnapshot, type writeEtcdSnapshotOffThread } from '../../../src/server/etcd_snapshot';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'etcd-snapshot-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

describe("Maintenance.Snapshot's etcd-format file", () => {
  it('carries the members as etcd writes them, and the removed ones in members_removed', async () => {
    const db = path.join(dir, 'src', 'db');
    const be = Backend.open(db, { flushIntervalMs: 0 });
    be.batch(() => {
      const ms = new Members(be.subDb('members'), be.subDb('members_removed'));
      ms.add({ id: 0x8e9e05c52164694dn, name: 'm1', peerUrls: ['http://10.0.0.1:2380'], clientUrls: ['http://10.0.0.1:2379'], isLearner: false });
      ms.add({ id: 0x91bc3c398fb3c146n, name: '', peerUrls: ['http://10.0.0.2:2380'], clientUrls: [], isLearner: true });
      ms.add({ id: 0xfd422379fda50e48n, name: 'm3', peerUrls: ['http://10.0.0.3:2380'], clientUrls: [], isLearner: false });
      ms.remove(0xfd422379fda50e48n);
      ms.add({ id: 0x1234n, name: 'gone', peerUrls: ['http://10.0.0.4:2380'], clientUrls: [], isLearner: false });
      ms.remove(0x1234n);
    });
    await be.close();

    const out = path.join(dir, 'etcd.db');
    await writeEtcdSnapshot(db, out);
    const r = BboltReader.open(out);
    try {
      const text = (name: string): string[][] => [...r.entries(name)].map((e) => [e.key.toString(), e.value.toString()]);
      expect(text('members')).toEqual([
        ['8e9e05c52164694d', '{"id":10276657743932975437,"peerURLs":["http://10.0.0.1:2380"],"name":"m1","clientURLs":["http://10.0.0.1:2379"]}'],
        ['91bc3c398fb3c146', '{"id":10501334649042878790,"peerURLs":["http://10.0.0.2:2380"],"isLearner":true}'],
      ]);
      expect(text('members_removed')).toEqual([
        ['1234', 'removed'],
        ['fd422379fda50e48', 'removed'],
      ]);
    } finally {
      r.close();
    }
  });

  it('is the same file byte for byte when converted on a worker thread (the built server does so from 64 MiB on), and a failed conversion there is an error', async () => {
    const db = path.join(dir, 'w', 'db');
    const be = Backend.open(db, { flushIntervalMs: 0 });
    const kv = be.subDb('key');
    be.batch(() => {
      for (let i = 0; i < 3000; i++) kv.putSync(Buffer.from(`rev${String(i).padStart(6, '0')}`), Buffer.alloc(200 + (i % 50), i % 251));
      be.subDb('lease').putSync(Buffer.from('lease1'), Buffer.from('ttl'));
      new Members(be.subDb('members'), be.subDb('members_removed')).add({ id: 0x10n, name: 'm', peerUrls: ['http://10.0.0.1:2380'], clientUrls: [], isLearner: false });
    });
    await be.close();
    // The worker runs the compiled module (npm test builds dist/ first).
    const built = path.resolve(__dirname, '../../../dist/src/server/etcd_snapshot.js');
    expect(fs.existsSync(built), 'dist/ is built').toBe(true);
    const offThread = (createRequire(__filename)(built) as { writeEtcdSnapshotOffThread: typeof writeEtcdSnapshotOffThread }).writeEtcdSnapshotOffThread;
    const here = path.join(dir, 'here.db');
    const there = path.join(dir, 'there.db');
    await writeEtcdSnapshot(db, here);
    expect(await offThread(db, there, 0)).toBe('worker');
    expect(fs.readFileSync(there).equals(fs.readFileSync(here))).toBe(true);
    // Below the size the conversion stays in this thread.
    expect(await offThread(db, path.join(dir, 'small.db'))).toBe('in-thread');
    // A copy that is not an LMDB file: the worker's error comes back as a rejection.
    const bogus = path.join(dir, 'bogus');
    fs.writeFileSync(bogus, Buffer.alloc(8192, 7));
    await expect(offThread(bogus, path.join(dir, 'bogus.db'), 0)).rejects.toThrow(/snapshot conversion failed|worker/);
  });
});
