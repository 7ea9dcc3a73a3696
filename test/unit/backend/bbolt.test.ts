// bbolt files written by BboltWriter read back by BboltReader, and accepted by etcd's own tool
// (etcdctl snapshot status opens them with bbolt and runs its consistency check, Tx.Check).
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { BboltReader } from '../../../src/backend/bbolt_reader';
import { BboltWriter } from '../../../src/backend/bbolt_writer';
import { mulberry32 } from '../../helpers/random';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bbolt-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

function bucketOf(n: number, rand: () => number, valueBytes: (i: number) => number): Array<[Buffer, Buffer]> {
  const out: Array<[Buffer, Buffer]> = [];
  for (let i = 0; i < n; i++) {
    const key = Buffer.alloc(17);
    key.writeBigUInt64BE(BigInt(i + 2), 0);
    key[8] = 0x5f;
    const value = Buffer.alloc(valueBytes(i));
    for (let j = 0; j < value.length; j++) value[j] = Math.floor(rand() * 256);
    out.push([key, value]);
  }
  return out;
}

describe('bbolt files', () => {
  it('round-trip: branch levels, overflow pages, empty buckets; etcdctl snapshot status checks them', async () => {
    const rand = mulberry32(7);
    const buckets: Record<string, Array<[Buffer, Buffer]>> = {
      // ~40k records of 0-300 bytes: several branch levels.
      key: bucketOf(40_000, rand, () => Math.floor(rand() * 300)),
      // values of one to several pages.
      lease: bucketOf(20, rand, (i) => 3000 + i * 1500),
      meta: [[Buffer.from('consistent_index'), Buffer.from('0000000000000007', 'hex')]],
      alarm: [],
    };
    const file = path.join(dir, 'a.db');
    const w = new BboltWriter(file);
    for (const [name, entries] of Object.entries(buckets)) await w.addBucket(name, entries);
    const size = w.finish();
    expect(fs.statSync(file).size).toBe(size);

    const r = BboltReader.open(file);
    try {
      expect(r.bucketNames()).toEqual(['alarm', 'key', 'lease', 'meta']);
      for (const [name, entries] of Object.entries(buckets)) {
        const got = [...r.entries(name)];
        expect(got.length, name).toBe(entries.length);
        got.forEach((e, i) => {
          expect(e.key.equals(entries[i][0]), `${name} key ${i}`).toBe(true);
          expect(e.value.equals(entries[i][1]), `${name} value ${i}`).toBe(true);
        });
      }
    } finally {
      r.close();
    }

    const st = spawnSync('/usr/bin/etcdctl', ['snapshot', 'status', file, '-w', 'json'], { encoding: 'utf8', env: { ...process.env, ETCDCTL_API: '3' } });
    expect(st.stderr).toBe('');
    expect(st.status).toBe(0);
    const j = JSON.parse(st.stdout) as { revision: number; totalKey: number; totalSize: number };
    expect(j).toMatchObject({ revision: 40_001, totalKey: 40_000 + 20 + 1, totalSize: size });
  });

  it('copies each record as it is added: values as views of one reused buffer that reports a length of its own, as lmdb-js hands them out', async () => {
    const rand = mulberry32(11);
    const entries = bucketOf(5_000, rand, (i) => (i % 500 === 0 ? 9000 : Math.floor(rand() * 400)));
    const file = path.join(dir, 'views.db');
    const w = new BboltWriter(file);
    const bucket = w.beginBucket('key');
    // One shared buffer for every value, as lmdb-js's read buffer: its `length` is set to the
    // value's, while its array is far larger (what Buffer.copy and set() would go by).
    const shared = Buffer.alloc(64 * 1024);
    const backing = new Uint8Array(shared.buffer, shared.byteOffset, shared.byteLength);
    for (const [key, value] of entries) {
      backing.set(value);
      Object.defineProperty(shared, 'length', { value: value.length, configurable: true });
      bucket.add(Buffer.from(key), shared, value.length);
      backing.fill(0xee, 0, value.length); // reused by the next read
      await bucket.yieldIfDue();
    }
    await bucket.end();
    expect(() => w.beginBucket('key')).toThrow(/added twice/);
    await w.addBucket('meta', []);
    w.finish();
    const r = BboltReader.open(file);
    try {
      const got = [...r.entries('key')];
      expect(got.length).toBe(entries.length);
      got.forEach((e, i) => {
        expect(e.key.equals(entries[i][0]), `key ${i}`).toBe(true);
        expect(e.value.equals(entries[i][1]), `value ${i}`).toBe(true);
      });
    } finally {
      r.close();
    }
    const st = spawnSync('/usr/bin/etcdctl', ['snapshot', 'status', file, '-w', 'json'], { encoding: 'utf8', env: { ...process.env, ETCDCTL_API: '3' } });
    expect(st.stderr).toBe('');
    expect(st.status).toBe(0);
  });

  it('refuses keys out of order', async () => {
    const w = new BboltWriter(path.join(dir, 'b.db'));
    await expect(w.addBucket('key', [[Buffer.from('b'), Buffer.alloc(0)], [Buffer.from('a'), Buffer.alloc(0)]])).rejects.toThrow('strictly ascending');
    w.abort();
    expect(fs.existsSync(path.join(dir, 'b.db'))).toBe(false);
  });
});
