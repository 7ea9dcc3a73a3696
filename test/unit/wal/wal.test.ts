import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { open as openLmdb } from 'lmdb';
import { Wal } from '../../../src/wal/wal';
import { Syncer } from '../../../src/wal/syncer';
import { encodeEntry, encodeHardState, encodeIndexKey } from '../../../src/wal/codec';
import type { Entry } from '../../../src/raft/types';

const dirs: string[] = [];
function tmp(): string {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), 'wal-'));
  dirs.push(d);
  return d;
}
afterEach(() => {
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});

function ent(index: number, term: number, data = `e${index}`): Entry {
  return { index, term, type: 0, data: Buffer.from(data) };
}

const identity = { memberId: 0x8e9e05c52164694dn, clusterId: 0xcdf818194e3a8c32n, name: 'default' };

describe('WAL', () => {
  it('reads back what it saved, after reopening', async () => {
    const dir = tmp();
    let wal = Wal.open(dir);
    await wal.create(identity);
    await wal.save({ term: 2, vote: identity.memberId, commit: 2 }, [ent(1, 1), ent(2, 2), ent(3, 2)], null);
    await wal.close();
    wal = Wal.open(dir);
    const c = wal.readAll();
    expect(c.identity).toEqual(identity);
    expect(c.hardState).toEqual({ term: 2, vote: identity.memberId, commit: 2 });
    expect(c.entries.map((e) => [e.index, e.term, e.data.toString()])).toEqual([
      [1, 1, 'e1'],
      [2, 2, 'e2'],
      [3, 2, 'e3'],
    ]);
    await wal.close();
  });

  it("opened with the entries' data on disk, hands back where each entry is and reads its data when asked", async () => {
    const dir = tmp();
    let wal = Wal.open(dir, { segmentBytes: 4096 });
    await wal.create(identity);
    const big = 'x'.repeat(700);
    const first: Entry[] = [];
    for (let i = 1; i <= 30; i++) first.push(ent(i, 1, i === 5 ? '' : `${i}:${big}`));
    for (const e of first) await wal.save(null, [e], null);
    await wal.save({ term: 2, vote: 0n, commit: 25 }, [ent(28, 2, 'new28')], null);
    expect(wal.segmentFiles().length).toBeGreaterThan(2);
    await wal.close();
    wal = Wal.open(dir, { entryData: 'on-disk' });
    const c = wal.readAll();
    expect(c.entries).toEqual([]);
    expect(c.entryHeads.map((h) => [h.index, h.term, h.dataBytes])).toEqual([
      ...first.slice(0, 27).map((e) => [e.index, 1, e.data.length]),
      [28, 2, 5],
    ]);
    expect(c.entryHeads[4]!.dataBytes).toBe(0);
    for (const i of [1, 17, 27, 2]) expect(wal.readEntryData(i, 1).toString()).toBe(`${i}:${big}`);
    expect(wal.readEntryData(28, 2).toString()).toBe('new28');
    expect(() => wal.readEntryData(29, 1)).toThrow(/entry 29 is not in the WAL/);
    // The default keeps the data in memory, as before.
    await wal.close();
    wal = Wal.open(dir);
    expect(wal.readAll().entries.map((e) => e.data.toString())).toEqual([...first.slice(0, 27).map((e) => e.data.toString()), 'new28']);
    expect(wal.readAll().entryHeads).toEqual([]);
    await wal.close();
  });

  it('replaces a conflicting uncommitted tail', async () => {
    const dir = tmp();
    const wal = Wal.open(dir);
    await wal.create(identity);
    await wal.save(null, [ent(1, 1), ent(2, 1), ent(3, 1), ent(4, 1)], null);
    await wal.save({ term: 2, vote: 0n, commit: 1 }, [ent(3, 2, 'new3')], null);
    const c = wal.readAll();
    expect(c.entries.map((e) => [e.index, e.term, e.data.toString()])).toEqual([
      [1, 1, 'e1'],
      [2, 1, 'e2'],
      [3, 2, 'new3'],
    ]);
    await wal.close();
  });

  it('drops entries covered by a snapshot and continues after it', async () => {
    const dir = tmp();
    const wal = Wal.open(dir);
    await wal.create(identity);
    await wal.save({ term: 1, vote: 0n, commit: 5 }, [1, 2, 3, 4, 5].map((i) => ent(i, 1)), null);
    const confState = { voters: [identity.memberId], learners: [], votersOutgoing: [], learnersNext: [], autoLeave: false };
    await wal.compact(4, { index: 3, term: 1, confState });
    const c = wal.readAll();
    expect(c.snapshot?.index).toBe(3);
    expect(c.snapshot?.confState.voters).toEqual([identity.memberId]);
    expect(c.entries.map((e) => e.index)).toEqual([4, 5]);
    await wal.close();
  });

  it('refuses to overwrite an identity', async () => {
    const wal = Wal.open(tmp());
    await wal.create(identity);
    await expect(wal.create(identity)).rejects.toThrow();
    await wal.close();
  });

  it('cuts a torn record off the end and keeps everything before it', async () => {
    const dir = tmp();
    let wal = Wal.open(dir);
    await wal.create(identity);
    await wal.save({ term: 1, vote: 0n, commit: 2 }, [ent(1, 1), ent(2, 1)], null);
    await wal.save(null, [ent(3, 1, 'x'.repeat(100))], null);
    await wal.close();
    // A crash in the middle of the last write: its tail never reached the disk.
    const [file] = fs.readdirSync(dir).filter((f) => f.endsWith('.wal'));
    const full = fs.statSync(path.join(dir, file)).size;
    fs.truncateSync(path.join(dir, file), full - 40);
    wal = Wal.open(dir);
    expect(wal.readAll().entries.map((e) => e.index)).toEqual([1, 2]);
    // Appends continue right after the intact part.
    await wal.save(null, [ent(3, 2, 'again')], null);
    await wal.close();
    wal = Wal.open(dir);
    expect(wal.readAll().entries.map((e) => [e.index, e.term, e.data.toString()])).toEqual([
      [1, 1, 'e1'],
      [2, 1, 'e2'],
      [3, 2, 'again'],
    ]);
    await wal.close();
  });

  it('keeps its file zero-filled ahead of the records, and a crash with that tail loses nothing', async () => {
    const dir = tmp();
    const first = Wal.open(dir);
    await first.create(identity);
    await first.save({ term: 1, vote: 0n, commit: 2 }, [ent(1, 1), ent(2, 1)], null);
    const [file] = fs.readdirSync(dir).filter((f) => f.endsWith('.wal'));
    const p = path.join(dir, file);
    // Grown ahead (so an fdatasync does not also have to commit a new file size), zeros after the records.
    const grown = fs.statSync(p).size;
    expect(grown).toBeGreaterThanOrEqual(128 * 1024);
    const bytes = fs.readFileSync(p);
    const recordsEnd = bytes.length - [...bytes].reverse().findIndex((b) => b !== 0);
    expect(recordsEnd).toBeLessThan(1024);
    // The process dies here: no close, the zero tail stays. A new process opens the log.
    let wal = Wal.open(dir);
    expect(wal.readAll().entries.map((e) => e.index)).toEqual([1, 2]);
    await wal.save({ term: 1, vote: 0n, commit: 3 }, [ent(3, 1, 'after')], null);
    await wal.close();
    // A clean close leaves the file ending with its last record.
    expect(fs.statSync(p).size).toBeLessThan(1024);
    wal = Wal.open(dir);
    expect(wal.readAll().entries.map((e) => [e.index, e.data.toString()])).toEqual([
      [1, 'e1'],
      [2, 'e2'],
      [3, 'after'],
    ]);
    expect(wal.readAll().hardState.commit).toBe(3);
    await wal.close();
    await first.close();
  });

  it('treats a flipped bit inside the last record as a torn write, not as data', async () => {
    const dir = tmp();
    let wal = Wal.open(dir);
    await wal.create(identity);
    await wal.save(null, [ent(1, 1), ent(2, 1, 'payload-two')], null);
    await wal.close();
    const [file] = fs.readdirSync(dir).filter((f) => f.endsWith('.wal'));
    const p = path.join(dir, file);
    const b = fs.readFileSync(p);
    b[b.length - 3] ^= 0x10;
    fs.writeFileSync(p, b);
    wal = Wal.open(dir);
    expect(wal.readAll().entries.map((e) => e.index)).toEqual([1]);
    await wal.close();
  });

  it("refuses, without writing, a segment whose first record is not ours (etcd's WAL has the same file names)", () => {
    const dir = tmp();
    const file = path.join(dir, '0000000000000000-0000000000000000.wal');
    // etcd's first record: an 8-byte length, then walpb.Record{type: crcType} (08 04 ...).
    const etcdHead = Buffer.concat([Buffer.from('0400000000000084080410000000000020000000000000000801', 'hex'), Buffer.alloc(64, 7)]);
    fs.writeFileSync(file, etcdHead);
    expect(() => Wal.open(dir)).toThrow(/is a WAL segment of etcd itself, not of etcd-ts/);
    expect(fs.readFileSync(file)).toEqual(etcdHead);
    // Anything else that does not begin with a record: refused too, not cut off as a torn tail.
    const garbage = Buffer.concat([Buffer.from('not a wal record at all'), Buffer.alloc(100, 1)]);
    fs.writeFileSync(file, garbage);
    expect(() => Wal.open(dir)).toThrow(/does not begin with a record of etcd-ts/);
    expect(fs.readFileSync(file)).toEqual(garbage);
  });

  it('starts new segments as it grows, reads across them, and compaction deletes the old ones', async () => {
    const dir = tmp();
    let wal = Wal.open(dir, { segmentBytes: 4096 });
    await wal.create(identity);
    const big = 'v'.repeat(500);
    for (let i = 1; i <= 60; i++) await wal.save({ term: 1, vote: 0n, commit: i - 1 }, [ent(i, 1, `${i}:${big}`)], null);
    // A new leader overwrites an uncommitted tail that began in an earlier segment.
    const segsBefore = wal.segmentFiles().length;
    expect(segsBefore).toBeGreaterThan(5);
    await wal.save({ term: 2, vote: 0n, commit: 50 }, [ent(55, 2, 'new55')], null);
    await wal.close();
    wal = Wal.open(dir, { segmentBytes: 4096 });
    let c = wal.readAll();
    expect(c.identity).toEqual(identity);
    expect(c.hardState).toEqual({ term: 2, vote: 0n, commit: 50 });
    expect(c.entries.map((e) => e.index)).toEqual(Array.from({ length: 55 }, (_, i) => i + 1));
    expect(c.entries[54].data.toString()).toBe('new55');
    const confState = { voters: [identity.memberId], learners: [], votersOutgoing: [], learnersNext: [], autoLeave: false };
    await wal.compact(40, { index: 45, term: 1, confState });
    expect(wal.segmentFiles().length).toBeLessThan(segsBefore);
    await wal.close();
    wal = Wal.open(dir, { segmentBytes: 4096 });
    c = wal.readAll();
    expect(c.identity).toEqual(identity);
    expect(c.snapshot?.index).toBe(45);
    expect(c.entries.map((e) => e.index)).toEqual([46, 47, 48, 49, 50, 51, 52, 53, 54, 55]);
    await wal.close();
  });

  it('refuses a log whose earlier segment is damaged, with entries kept in memory or on disk', async () => {
    const dir = tmp();
    const wal = Wal.open(dir, { segmentBytes: 4096 });
    await wal.create(identity);
    for (let i = 1; i <= 30; i++) await wal.save({ term: 1, vote: 0n, commit: i - 1 }, [ent(i, 1, `${i}:${'d'.repeat(500)}`)], null);
    const files = wal.segmentFiles();
    expect(files.length).toBeGreaterThan(2);
    await wal.close();
    // A bit flipped inside a record of the first segment: not a torn tail, since more segments follow.
    const first = fs.readFileSync(files[0]!);
    const at = first.indexOf('5:ddd');
    expect(at).toBeGreaterThan(0);
    first[at + 10] ^= 0x01;
    fs.writeFileSync(files[0]!, first);
    expect(() => Wal.open(dir, { segmentBytes: 4096 })).toThrow(/is damaged at offset/);
    expect(() => Wal.open(dir, { segmentBytes: 4096, entryData: 'on-disk' })).toThrow(/is damaged at offset/);
  });

  it('reads an entry back from its record: across segments, after a tail overwrite, a reopen and a compaction', async () => {
    const dir = tmp();
    let wal = Wal.open(dir, { segmentBytes: 4096 });
    await wal.create(identity);
    const big = 'v'.repeat(500);
    for (let i = 1; i <= 60; i += 3) {
      await wal.save({ term: 1, vote: 0n, commit: i - 1 }, [ent(i, 1, `${i}:${big}`), ent(i + 1, 1, `${i + 1}:${big}`), ent(i + 2, 1, `${i + 2}:${big}`)], null);
    }
    await wal.save({ term: 2, vote: 0n, commit: 50 }, [ent(55, 2, 'new55')], null);
    expect(wal.segmentFiles().length).toBeGreaterThan(5);
    const check = (w: Wal, from: number): void => {
      // Out of order on purpose: the read-ahead must not serve a stale stretch.
      for (const i of [54, from, 30, 31, 29, 53]) expect(w.readEntryData(i, 1).toString()).toBe(`${i}:${big}`);
      expect(w.readEntryData(55, 2).toString()).toBe('new55');
      expect(() => w.readEntryData(55, 1)).toThrow(/holds entry 55 term 2 where 55 term 1/);
      expect(() => w.readEntryData(56, 1)).toThrow(/entry 56 is not in the WAL/);
    };
    check(wal, 1);
    await wal.close();
    wal = Wal.open(dir, { segmentBytes: 4096 });
    check(wal, 1);
    const confState = { voters: [identity.memberId], learners: [], votersOutgoing: [], learnersNext: [], autoLeave: false };
    await wal.compact(40, { index: 45, term: 1, confState });
    expect(() => wal.readEntryData(40, 1)).toThrow(/entry 40 is not in the WAL/);
    for (let i = 41; i <= 54; i++) expect(wal.readEntryData(i, 1).toString()).toBe(`${i}:${big}`);
    // A snapshot from the leader replaces the log: nothing before it is read back any more.
    await wal.save({ term: 3, vote: 0n, commit: 100 }, [], { data: Buffer.alloc(0), metadata: { index: 100, term: 3, confState } });
    expect(() => wal.readEntryData(54, 1)).toThrow(/entry 54 is not in the WAL/);
    await wal.save({ term: 3, vote: 0n, commit: 101 }, [ent(101, 3, 'after')], null);
    expect(wal.readEntryData(101, 3).toString()).toBe('after');
    await wal.close();
  });

  it('refuses to hand back an entry whose record was damaged after it was written', async () => {
    const dir = tmp();
    const wal = Wal.open(dir, { segmentBytes: 4096 });
    await wal.create(identity);
    for (let i = 1; i <= 20; i++) await wal.save({ term: 1, vote: 0n, commit: i - 1 }, [ent(i, 1, `${i}:${'w'.repeat(500)}`)], null);
    const first = wal.segmentFiles()[0];
    const bytes = fs.readFileSync(first);
    const at = bytes.indexOf(Buffer.from('2:www'));
    expect(at).toBeGreaterThan(0);
    bytes[at + 10] ^= 0xff;
    fs.writeFileSync(first, bytes);
    expect(() => wal.readEntryData(2, 1)).toThrow(/WAL record of entry 2 does not read back/);
    expect(wal.readEntryData(20, 1).toString()).toBe(`20:${'w'.repeat(500)}`);
    await wal.close();
  });

  it('after installing a snapshot from the leader, the log continues from it', async () => {
    const dir = tmp();
    let wal = Wal.open(dir);
    await wal.create(identity);
    await wal.save({ term: 1, vote: 0n, commit: 3 }, [ent(1, 1), ent(2, 1), ent(3, 1)], null);
    const confState = { voters: [identity.memberId], learners: [], votersOutgoing: [], learnersNext: [], autoLeave: false };
    await wal.save({ term: 3, vote: 0n, commit: 100 }, [], { data: Buffer.alloc(0), metadata: { index: 100, term: 3, confState } });
    await wal.save({ term: 3, vote: 0n, commit: 101 }, [ent(101, 3)], null);
    await wal.close();
    wal = Wal.open(dir);
    const c = wal.readAll();
    expect(c.snapshot?.index).toBe(100);
    expect(c.entries.map((e) => e.index)).toEqual([101]);
    await wal.close();
  });

  it('refuses a log with a hole in it', async () => {
    const dir = tmp();
    const wal = Wal.open(dir);
    await wal.create(identity);
    await wal.save(null, [ent(1, 1)], null);
    await wal.save(null, [ent(3, 1)], null);
    expect(() => wal.readAll()).toThrow(/gap/);
    await wal.close();
  });

  it('migrates a log written by the earlier LMDB format, losing nothing', async () => {
    const dir = tmp();
    const env = openLmdb<Buffer, Buffer>({ path: path.join(dir, 'log.mdb'), keyEncoding: 'binary', encoding: 'binary' });
    const entries = env.openDB<Buffer, Buffer>({ name: 'entries', keyEncoding: 'binary', encoding: 'binary' });
    const meta = env.openDB<Buffer, string>({ name: 'meta', keyEncoding: 'ordered-binary', encoding: 'binary' });
    await env.transaction(() => {
      meta.putSync('identity', Buffer.from(JSON.stringify({ memberId: identity.memberId.toString(), clusterId: identity.clusterId.toString(), name: 'default' })));
      meta.putSync('hardstate', encodeHardState({ term: 2, vote: identity.memberId, commit: 3 }));
      for (const e of [ent(1, 1), ent(2, 2), ent(3, 2)]) entries.putSync(encodeIndexKey(e.index), encodeEntry(e));
    });
    await env.close();
    let wal = Wal.open(dir);
    expect(fs.existsSync(path.join(dir, 'log.mdb'))).toBe(false);
    await wal.save({ term: 2, vote: identity.memberId, commit: 4 }, [ent(4, 2)], null);
    await wal.close();
    wal = Wal.open(dir);
    const c = wal.readAll();
    expect(c.identity).toEqual(identity);
    expect(c.hardState).toEqual({ term: 2, vote: identity.memberId, commit: 4 });
    expect(c.entries.map((e) => [e.index, e.term, e.data.toString()])).toEqual([
      [1, 1, 'e1'],
      [2, 2, 'e2'],
      [3, 2, 'e3'],
      [4, 2, 'e4'],
    ]);
    await wal.close();
  });

  it('reads back a save whose fdatasync ran inline, as one synced on the thread pool', async () => {
    const dir = tmp();
    let wal = Wal.open(dir);
    await wal.create(identity);
    await wal.save({ term: 1, vote: 0n, commit: 0 }, [ent(1, 1)], null, true, true);
    await wal.save({ term: 1, vote: 0n, commit: 1 }, [ent(2, 1)], null, true, false);
    await wal.save({ term: 1, vote: 0n, commit: 2 }, [ent(3, 1)], null, true, true);
    await wal.close();
    wal = Wal.open(dir);
    expect(wal.readAll().entries.map((e) => e.data.toString())).toEqual(['e1', 'e2', 'e3']);
    expect(wal.readAll().hardState.commit).toBe(2);
    await wal.close();
  });
});

describe('WAL syncer', () => {
  it('fails every later sync, inline or pooled, once an fdatasync has failed', async () => {
    const file = path.join(tmp(), 'f');
    const fd = fs.openSync(file, 'w');
    const syncer = new Syncer(fd);
    syncer.syncNow();
    await syncer.sync();
    fs.closeSync(fd);
    let first: unknown = null;
    try {
      syncer.syncNow();
    } catch (e) {
      first = e;
    }
    expect((first as NodeJS.ErrnoException | null)?.code).toBe('EBADF');
    await expect(syncer.sync()).rejects.toBe(first);
    expect(() => syncer.syncNow()).toThrow(first as Error);
  });
});
