import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { Backend } from '../../../src/backend/backend';
import { BboltReader } from '../../../src/backend/bbolt_reader';
import { Members } from '../../../src/membership/members';
import { writeEtcdSnapshot } from '../../../src/server/etcd_snapshot';

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
});
