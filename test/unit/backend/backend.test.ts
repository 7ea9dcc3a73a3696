import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { assertLmdbFile, Backend, BackendFormatError, RecordScanAborted, SNAPSHOT_CHUNK_BYTES } from '../../../src/backend/backend';
import { crc32c, Crc32c } from '../../../src/backend/crc32c';

const tempDirs: string[] = [];
afterAll(() => {
  for (const dir of tempDirs.splice(0)) fs.rmSync(dir, { recursive: true, force: true });
});

/** KiB of the database file that are mapped and resident in this process (/proc/self/smaps). */
function residentMapKib(file: string): number {
  let kib = 0;
  let inFile = false;
  for (const line of fs.readFileSync('/proc/self/smaps', 'utf8').split('\n')) {
    if (/^[0-9a-f]+-[0-9a-f]+ /.test(line)) inFile = line.endsWith(` ${file}`);
    else if (inFile && line.startsWith('Rss:')) kib += Number(line.split(/\s+/)[1]);
  }
  return kib;
}

async function until(cond: () => boolean, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 10));
  }
}

function tmpDb(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'backend-test-'));
  tempDirs.push(dir);
  return path.join(dir, 'member', 'snap', 'db');
}

describe('crc32c', () => {
  it('matches the standard check values', () => {
    expect(crc32c(Buffer.from('123456789'))).toBe(0xe3069283);
    expect(new Crc32c().update(Buffer.from('1234')).update(Buffer.from('56789')).digest()).toBe(0xe3069283);
    expect(crc32c(Buffer.alloc(0))).toBe(0);
    expect(crc32c(Buffer.alloc(32))).toBe(0x8a9136aa);
  });
});

describe('Backend', () => {
  it('keeps the consistent index across reopen and refuses to go back', async () => {
    const p = tmpDb();
    const be = Backend.open(p);
    expect(be.consistentIndex()).toBe(0);
    be.batch(() => be.setConsistentIndex(5));
    be.batch(() => be.setConsistentIndex(9));
    expect(be.consistentIndex()).toBe(9);
    expect(() => be.batch(() => be.setConsistentIndex(3))).toThrow();
    expect(be.consistentIndex()).toBe(9);
    expect(() => be.setConsistentIndex(10)).toThrow(); // outside batch
    await be.flushed();
    await be.close();
    const be2 = Backend.open(p);
    expect(be2.consistentIndex()).toBe(9);
    await be2.close();
  });

  it('aborts the whole batch when it throws, and nested batches join', async () => {
    const be = Backend.open(tmpDb());
    const db = be.subDb('x');
    expect(() =>
      be.batch(() => {
        be.batch(() => db.putSync(Buffer.from('a'), Buffer.from('1')));
        be.setConsistentIndex(4);
        throw new Error('boom');
      }),
    ).toThrow('boom');
    expect(db.getBinary(Buffer.from('a'))).toBeUndefined();
    expect(be.consistentIndex()).toBe(0);
    const ran: string[] = [];
    be.batch(() => {
      db.putSync(Buffer.from('a'), Buffer.from('1'));
      be.onCommit(() => ran.push('after'));
      ran.push('inside');
    });
    expect(ran).toEqual(['inside', 'after']);
    await be.close();
  });

  it('flushes in the background after batches, and supports durable commits', async () => {
    const be = Backend.open(tmpDb(), { flushIntervalMs: 20 });
    expect(be.backgroundFlushCount()).toBe(0);
    be.batch(() => be.setConsistentIndex(1));
    const deadline = Date.now() + 5_000;
    while (be.backgroundFlushCount() === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    expect(be.backgroundFlushCount()).toBe(1);
    // Nothing written since: the timer does not flush again.
    await new Promise((r) => setTimeout(r, 100));
    expect(be.backgroundFlushCount()).toBe(1);
    await be.close();
    const p = tmpDb();
    const d = Backend.open(p, { durableCommits: true });
    d.batch(() => d.setConsistentIndex(3));
    await d.close();
    const d2 = Backend.open(p);
    expect(d2.consistentIndex()).toBe(3);
    await d2.close();
  });

  it('refuses a file whose newest meta page points past its end (a torn write-back), before LMDB maps it', async () => {
    const p = tmpDb();
    const be = Backend.open(p);
    const db = be.subDb('big');
    be.batch(() => {
      for (let i = 0; i < 500; i++) db.putSync(Buffer.from(`key-${i}`), Buffer.alloc(200, i % 256));
    });
    await be.close();
    expect(() => assertLmdbFile(p)).not.toThrow();
    const whole = fs.statSync(p).size;
    // The meta pages reached the disk, the last data pages did not.
    fs.truncateSync(p, whole - 8192);
    expect(() => assertLmdbFile(p)).toThrow(BackendFormatError);
    expect(() => assertLmdbFile(p)).toThrow(/is damaged: its newest meta page \(transaction \d+\) uses pages up to byte \d+ but the file holds \d+ bytes/);
    expect(() => Backend.open(p)).toThrow(BackendFormatError);
  });

  it('with unsafeNoFsync, what was committed reads back after a close', async () => {
    const p = tmpDb();
    const be = Backend.open(p, { unsafeNoFsync: true, batchIntervalMs: 50 });
    be.batch(() => be.setConsistentIndex(7));
    await be.flushed();
    await be.close();
    const again = Backend.open(p);
    expect(again.consistentIndex()).toBe(7);
    await again.close();
  });

  it('stores metadata and reports sizes', async () => {
    const be = Backend.open(tmpDb());
    be.batch(() => be.metaPut('k', Buffer.from('v')));
    expect(be.metaGet('k')?.toString()).toBe('v');
    expect(be.metaGet('missing')).toBeUndefined();
    expect(be.sizeBytes()).toBeGreaterThan(0);
    expect(be.sizeInUseBytes()).toBeGreaterThan(0);
    expect(be.sizeInUseBytes()).toBeLessThanOrEqual(be.sizeBytes());
    await be.close();
  });

  it('streams a snapshot whose last chunk is the sha256 of the rest', async () => {
    const be = Backend.open(tmpDb());
    const db = be.subDb('big');
    be.batch(() => {
      for (let i = 0; i < 2000; i++) db.putSync(Buffer.from(`key-${i}`), Buffer.alloc(100, i % 256));
    });
    const chunks: Buffer[] = [];
    for await (const c of be.snapshotStream()) chunks.push(c);
    expect(chunks.length).toBeGreaterThan(2);
    const trailer = chunks.pop()!;
    expect(trailer.length).toBe(32);
    for (const c of chunks) expect(c.length).toBeLessThanOrEqual(SNAPSHOT_CHUNK_BYTES);
    const body = Buffer.concat(chunks);
    expect(createHash('sha256').update(body).digest().equals(trailer)).toBe(true);
    // The copy is a database we can open and read.
    const copyPath = tmpDb();
    fs.mkdirSync(path.dirname(copyPath), { recursive: true });
    fs.writeFileSync(copyPath, body);
    const be2 = Backend.open(copyPath);
    expect(be2.subDb('big').getBinary(Buffer.from('key-1999'))?.length).toBe(100);
    await be2.close();
    // The copy holds a read transaction until it is made (etcd_mvcc_db_open_read_transactions).
    expect(be.openReadTransactions()).toBe(0);
    const opening = be.openSnapshot();
    expect(be.openReadTransactions()).toBe(1);
    const snap = await opening;
    expect(be.openReadTransactions()).toBe(0);
    let n = 0;
    let last: Buffer = Buffer.alloc(0);
    for await (const c of snap.chunks) {
      n += c.length;
      last = c;
    }
    expect(n - last.length).toBe(snap.totalBytes);
    expect(fs.readdirSync(path.dirname(be.filePath)).filter((f) => f.startsWith('.snap-'))).toEqual([]);
    await be.close();
  });

  it('defragments and keeps sub-database handles working', async () => {
    const p = tmpDb();
    const be = Backend.open(p);
    const db = be.subDb('d');
    be.batch(() => {
      for (let i = 0; i < 5000; i++) db.putSync(Buffer.from(`k${i}`), Buffer.alloc(500, 1));
    });
    be.batch(() => {
      for (let i = 0; i < 4990; i++) db.removeSync(Buffer.from(`k${i}`));
      be.setConsistentIndex(7);
    });
    await be.flushed();
    const before = be.sizeBytes();
    await be.defragment();
    expect(be.sizeBytes()).toBeLessThan(before);
    expect(db.getBinary(Buffer.from('k4995'))?.length).toBe(500);
    expect(be.consistentIndex()).toBe(7);
    be.batch(() => db.putSync(Buffer.from('new'), Buffer.from('v')));
    expect(db.getBinary(Buffer.from('new'))?.toString()).toBe('v');
    await be.close();
    const be2 = Backend.open(p);
    expect(be2.subDb('d').getBinary(Buffer.from('new'))?.toString()).toBe('v');
    expect(be2.consistentIndex()).toBe(7);
    await be2.close();
  });

  it('scans records as views: every key and value in order, values larger than its read buffer, after a defragmentation; never inside a batch', async () => {
    const p = tmpDb();
    const be = Backend.open(p, { batchIntervalMs: 50 });
    const db = be.subDb('d');
    const valueOf = (i: number): Buffer => Buffer.alloc(i % 10 === 0 ? 100_000 + i : 1 + (i % 300), i % 251);
    const keyOf = (i: number): Buffer => Buffer.from(`k${String(i).padStart(4, '0')}`);
    be.batch(() => {
      for (let i = 0; i < 1000; i++) db.putSync(keyOf(i), valueOf(i));
    });
    const scan = (from: number): string[] => {
      const seen: string[] = [];
      const n = be.scanRecordViews('d', keyOf(from), (key, value, valueBytes) => {
        // What a view holds is checked during the call, as its users read it.
        seen.push(`${key.toString()}:${createHash('sha256').update(value.subarray(0, valueBytes)).digest('hex')}`);
      });
      expect(n).toBe(seen.length);
      return seen;
    };
    const expected = (from: number): string[] =>
      Array.from({ length: 1000 - from }, (_, j) => `${keyOf(from + j).toString()}:${createHash('sha256').update(valueOf(from + j)).digest('hex')}`);
    // The batch above is still in the shared transaction: the scan commits it first.
    expect(scan(0)).toEqual(expected(0));
    expect(scan(990)).toEqual(expected(990));
    expect(be.recordCount('d')).toBe(1000);
    expect(() => be.batch(() => be.scanRecordViews('d', keyOf(0), () => undefined))).toThrow(/inside a batch/);
    // The views' handle is reopened with the new file.
    await be.flushed();
    await be.defragment();
    expect(scan(500)).toEqual(expected(500));
    expect(() => be.scanRecordViews('nope', keyOf(0), () => undefined)).toThrow(/not open/);
    await be.close();
  });

  it('scans records in steps under one read transaction: writes and deletes meanwhile are not seen, no remap while open, a defragmentation aborts it', async () => {
    const be = Backend.open(tmpDb(), { batchIntervalMs: 50 });
    const db = be.subDb('d');
    const keyOf = (i: number): Buffer => Buffer.from(`k${String(i).padStart(4, '0')}`);
    be.batch(() => {
      for (let i = 0; i < 1000; i++) db.putSync(keyOf(i), Buffer.alloc(1 + (i % 300), i % 251));
    });
    const collect = (into: string[]) => (key: Buffer, value: Buffer, valueBytes: number): void => {
      into.push(`${key.toString()}:${value.subarray(0, valueBytes).toString('hex')}`);
    };
    const expected = (from: number, to: number): string[] =>
      Array.from({ length: to - from }, (_, j) => `${keyOf(from + j).toString()}:${Buffer.alloc(1 + ((from + j) % 300), (from + j) % 251).toString('hex')}`);
    // The batch above is still in the shared transaction: opening commits it first.
    const scan = be.openRecordScan('d', keyOf(10), keyOf(990));
    expect(be.openReadTransactions()).toBe(1);
    const seen: string[] = [];
    let steps = 0;
    for (;;) {
      steps++;
      const more = scan.step(97, collect(seen));
      // Between steps: overwrite, delete and add records, in shared transactions and committed ones.
      be.batch(() => {
        db.putSync(keyOf(500 + steps), Buffer.from('changed'));
        db.removeSync(keyOf(600 + steps));
        db.putSync(Buffer.from(`k0500x${steps}`), Buffer.from('new'));
      });
      if (steps % 3 === 0) await be.flushed();
      expect(be.releaseMappedPages()).toBe(false);
      await new Promise((r) => setImmediate(r));
      if (!more) break;
    }
    expect(steps).toBe(11); // 980 records in steps of 97: ten full ones and one short
    expect(seen).toEqual(expected(10, 990));
    expect(be.openReadTransactions()).toBe(0);
    expect(() => scan.step(1, () => undefined)).toThrow(/finished/);
    scan.close(); // again: nothing
    // A scan sees what was written since: the records changed above.
    const later: string[] = [];
    const again = be.openRecordScan('d', keyOf(501), keyOf(503));
    while (again.step(1, collect(later)));
    const changed = Buffer.from('changed').toString('hex');
    expect(later).toEqual([`${keyOf(501).toString()}:${changed}`, `${keyOf(502).toString()}:${changed}`]);
    // A defragmentation swaps the file: an open scan is aborted, its read transaction ended.
    const open = be.openRecordScan('d', keyOf(0), keyOf(999));
    expect(open.step(5, () => undefined)).toBe(true);
    await be.defragment();
    expect(be.openReadTransactions()).toBe(0);
    expect(() => open.step(5, () => undefined)).toThrow(RecordScanAborted);
    expect(() => be.batch(() => be.openRecordScan('d', keyOf(0), keyOf(1)))).toThrow(/inside a batch/);
    // Closing the backend aborts one too.
    const last = be.openRecordScan('d', keyOf(0), keyOf(999));
    await be.close();
    expect(() => last.step(5, () => undefined)).toThrow(RecordScanAborted);
  });

  it("hashes in steps as in one go: every sub-database's name, even an empty one's, then its records; writes between steps are not in it; the consistent index never is", async () => {
    const be = Backend.open(tmpDb(), { batchIntervalMs: 50 });
    const a = be.subDb('a');
    const z = be.subDb('z');
    be.batch(() => {
      for (let i = 0; i < 500; i++) a.putSync(Buffer.from(`a${i}`), Buffer.alloc(1 + (i % 200), i % 251));
      for (let i = 0; i < 30; i++) z.putSync(Buffer.from(`z${i}`), Buffer.from(`v${i}`));
      be.setConsistentIndex(10);
    });
    const whole = be.hash();
    // The reference, computed here from plain reads: names in order, then each one's records.
    const expected = new Crc32c();
    for (const name of ['a', 'meta', 'z']) {
      expected.update(Buffer.from(name));
      if (name === 'meta') continue; // only the consistent index is in it here
      for (const { key, value } of be.subDb(name).getRange({})) expected.update(key).update(value);
    }
    expect(whole).toBe(expected.digest());
    const records = ['a', 'meta', 'z'].reduce((n, name) => n + be.recordCount(name), 0);
    expect(records).toBe(531);
    let ci = 10;
    for (const step of [1, 7, 500, 531]) {
      const h = be.openHash();
      let steps = 0;
      for (;;) {
        steps++;
        const more = h.step(step);
        be.batch(() => {
          a.putSync(Buffer.from(`a${steps}`), Buffer.from(`changed${step}`));
          z.removeSync(Buffer.from(`z${steps % 30}`));
          be.setConsistentIndex(++ci);
        });
        await new Promise((r) => setImmediate(r));
        if (!more) break;
      }
      // A step short of `step` records ends it (the consistent index is read, not hashed).
      expect(steps).toBe(Math.floor(records / step) + 1);
      expect(h.digest()).toBe(whole);
      // Back to the data hashed, and the same hash in one go (the consistent index moved on).
      be.batch(() => {
        for (let i = 0; i < 500; i++) a.putSync(Buffer.from(`a${i}`), Buffer.alloc(1 + (i % 200), i % 251));
        for (let i = 500; i <= steps; i++) a.removeSync(Buffer.from(`a${i}`));
        for (let i = 0; i < 30; i++) z.putSync(Buffer.from(`z${i}`), Buffer.from(`v${i}`));
      });
      expect(be.hash()).toBe(whole);
    }
    // An empty sub-database's name counts.
    be.subDb('m');
    expect(be.hash()).not.toBe(whole);
    const early = be.openHash();
    expect(() => early.digest()).toThrow(/before its last step/);
    early.close();
    expect(be.openReadTransactions()).toBe(0);
    await be.close();
  });

  it('holds writes while a defragmentation copies the file, and copies again after a write that could not wait', async () => {
    const p = tmpDb();
    const be = Backend.open(p, { batchIntervalMs: 100, flushIntervalMs: 0 });
    const db = be.subDb('d');
    be.batch(() => {
      for (let i = 0; i < 3000; i++) db.putSync(Buffer.from(`k${i}`), Buffer.alloc(500, 1));
    });
    be.batch(() => {
      for (let i = 0; i < 2990; i++) db.removeSync(Buffer.from(`k${i}`));
    });
    await be.flushed();
    const before = be.sizeBytes();
    // Left open in the shared transaction when the defragmentation starts.
    be.batch(() => db.putSync(Buffer.from('before'), Buffer.from('b')));
    expect(be.writesHeld()).toBeNull();
    const defrag = be.defragment();
    const held = be.writesHeld();
    expect(held).not.toBeNull();
    expect(() => be.batch(() => db.putSync(Buffer.from('early'), Buffer.from('e')))).toThrow(/held for a defragmentation/);
    await held;
    expect(await defrag).toBe(true);
    expect(be.writesHeld()).toBeNull();
    expect(be.sizeBytes()).toBeLessThan(before / 2);
    expect(db.getBinary(Buffer.from('before'))?.toString()).toBe('b');
    expect(db.getBinary(Buffer.from('early'))).toBeUndefined();
    // A write that cannot wait ends the hold: that copy is thrown away and a new one made.
    const again = be.defragment();
    expect(be.writesHeld()).not.toBeNull();
    be.releaseWrites();
    expect(be.writesHeld()).toBeNull();
    be.batch(() => db.putSync(Buffer.from('urgent'), Buffer.from('u')));
    expect(await again).toBe(true);
    expect(db.getBinary(Buffer.from('urgent'))?.toString()).toBe('u');
    be.batch(() => db.putSync(Buffer.from('after'), Buffer.from('a')));
    await be.close();
    const be2 = Backend.open(p);
    const db2 = be2.subDb('d');
    for (const k of ['before', 'urgent', 'after']) expect(db2.getBinary(Buffer.from(k))?.length).toBe(1);
    expect(db2.getBinary(Buffer.from('k2995'))?.length).toBe(500);
    await be2.close();
  });

  it('writes without mapping what it writes; unmaps the pages a read of everything left resident, and keeps every handle and value', async () => {
    const p = tmpDb();
    const be = Backend.open(p, { flushIntervalMs: 0 });
    const db = be.subDb('d');
    const value = (i: number) => Buffer.alloc(1000, i % 251);
    for (let b = 0; b < 20; b++) {
      be.batch(() => {
        for (let i = b * 1000; i < (b + 1) * 1000; i++) db.putSync(Buffer.from(`k${i}`), value(i));
        be.setConsistentIndex(b + 1);
      });
    }
    // ~20 MB written with pwrite: mapped are only the pages the commits read to copy them (the
    // tree's path to each insert); through LMDB's write map all 20 MB were.
    expect(residentMapKib(p)).toBeLessThan(8 * 1024);
    // A read of everything (start-up's index rebuild) maps the whole file.
    let read = 0;
    for (const { value: v } of db.getRange({})) read += v.length;
    expect(read).toBe(20_000 * 1000);
    expect(residentMapKib(p)).toBeGreaterThan(16 * 1024);
    await be.flushed();
    // What start-up calls: the file is large enough to be worth it.
    expect(be.releaseMappedPagesAfterStart()).toBe(true);
    expect(be.remapCount()).toBe(1);
    expect(residentMapKib(p)).toBeLessThan(1024);
    // The same handle reads and writes through the new mapping.
    expect(db.getBinary(Buffer.from('k12345'))?.equals(value(12345))).toBe(true);
    expect(be.consistentIndex()).toBe(20);
    be.batch(() => {
      db.putSync(Buffer.from('after'), Buffer.from('remap'));
      be.setConsistentIndex(21);
    });
    // Dirty pages left by unflushed commits survive a remap, and the next flush covers them.
    expect(be.releaseMappedPages()).toBe(true);
    expect(db.getBinary(Buffer.from('after'))?.toString()).toBe('remap');
    await be.close();
    const again = Backend.open(p);
    expect(again.consistentIndex()).toBe(21);
    expect(again.subDb('d').getBinary(Buffer.from('after'))?.toString()).toBe('remap');
    expect(again.subDb('d').getBinary(Buffer.from('k19999'))?.equals(value(19999))).toBe(true);
    await again.close();
  });

  it('does not remap while a batch, a sync or a backup holds the environment', async () => {
    const be = Backend.open(tmpDb(), { flushIntervalMs: 0 });
    // A small file is not remapped at start-up (it would cost more than it frees).
    expect(be.releaseMappedPagesAfterStart()).toBe(false);
    const db = be.subDb('d');
    be.batch(() => {
      for (let i = 0; i < 2000; i++) db.putSync(Buffer.from(`k${i}`), Buffer.alloc(200, 7));
      expect(be.releaseMappedPages()).toBe(false);
    });
    const flushing = be.flushed();
    expect(be.releaseMappedPages()).toBe(false);
    await flushing;
    const snapshot = be.openSnapshot();
    expect(be.releaseMappedPages()).toBe(false);
    const snap = await snapshot;
    for await (const _ of snap.chunks) void _;
    expect(be.releaseMappedPages()).toBe(true);
    expect(be.remapCount()).toBe(1);
    await be.close();
  });

  it('refuses flushed() inside a batch (it could not be durable there)', async () => {
    const be = Backend.open(tmpDb(), { flushIntervalMs: 0 });
    let inside: Promise<void> | undefined;
    be.batch(() => {
      be.setConsistentIndex(1);
      inside = be.flushed();
    });
    await expect(inside).rejects.toThrow('flushed() inside a batch');
    await be.flushed();
    await be.close();
  });

  it('with a batch interval, batches share one transaction that commits when the interval ends', async () => {
    const p = tmpDb();
    const be = Backend.open(p, { batchIntervalMs: 50, flushIntervalMs: 0 });
    const db = be.subDb('s');
    const txnBefore = be.committedTxnId();
    const notified: number[] = [];
    for (let i = 1; i <= 3; i++) {
      be.batch(() => {
        db.putSync(Buffer.from(`k${i}`), Buffer.from(`v${i}`));
        be.setConsistentIndex(i);
        be.onCommit(() => notified.push(i));
      });
      // Every read of this process sees the batch at once, and its after-commit work has run.
      expect(db.getBinary(Buffer.from(`k${i}`))?.toString()).toBe(`v${i}`);
      expect(notified).toEqual([...Array(i).keys()].map((n) => n + 1));
    }
    // Nothing reached the file yet: the three batches wait in one transaction.
    expect(be.committedTxnId()).toBe(txnBefore);
    expect(be.sharedCommitCount()).toBe(0);
    await until(() => be.sharedCommitCount() === 1);
    expect(be.committedTxnId()).toBe(txnBefore + 1);
    await be.close();
    const be2 = Backend.open(p);
    expect(be2.subDb('s').getBinary(Buffer.from('k3'))?.toString()).toBe('v3');
    expect(be2.consistentIndex()).toBe(3);
    await be2.close();
  });

  it('undoes a batch that throws inside the shared transaction, and only that batch', async () => {
    const p = tmpDb();
    const be = Backend.open(p, { batchIntervalMs: 10_000, flushIntervalMs: 0 });
    const db = be.subDb('s');
    be.batch(() => {
      db.putSync(Buffer.from('kept'), Buffer.from('1'));
      be.setConsistentIndex(5);
    });
    const ran: string[] = [];
    expect(() =>
      be.batch(() => {
        db.putSync(Buffer.from('undone'), Buffer.from('2'));
        db.removeSync(Buffer.from('kept'));
        be.setConsistentIndex(6);
        be.onCommit(() => ran.push('undone'));
        throw new Error('boom');
      }),
    ).toThrow('boom');
    expect(db.getBinary(Buffer.from('undone'))).toBeUndefined();
    expect(db.getBinary(Buffer.from('kept'))?.toString()).toBe('1');
    expect(be.consistentIndex()).toBe(5);
    expect(ran).toEqual([]);
    // A throw in the batch that opens the transaction leaves none open.
    await be.flushed();
    expect(() =>
      be.batch(() => {
        db.putSync(Buffer.from('first'), Buffer.from('3'));
        throw new Error('boom');
      }),
    ).toThrow('boom');
    expect(db.getBinary(Buffer.from('first'))).toBeUndefined();
    be.batch(() => db.putSync(Buffer.from('after'), Buffer.from('4')));
    await be.close();
    const be2 = Backend.open(p);
    const db2 = be2.subDb('s');
    expect(db2.getBinary(Buffer.from('kept'))?.toString()).toBe('1');
    expect(db2.getBinary(Buffer.from('after'))?.toString()).toBe('4');
    expect(db2.getBinary(Buffer.from('undone'))).toBeUndefined();
    expect(db2.getBinary(Buffer.from('first'))).toBeUndefined();
    expect(be2.consistentIndex()).toBe(5);
    await be2.close();
  });

  it('commits the shared transaction at the batch limit, for flushed(), a snapshot, a defragmentation and close', async () => {
    const p = tmpDb();
    const be = Backend.open(p, { batchIntervalMs: 10_000, batchLimit: 3, flushIntervalMs: 0 });
    const db = be.subDb('s');
    const put = (k: string): void => be.batch(() => db.putSync(Buffer.from(k), Buffer.alloc(300, 1)));
    put('a');
    put('b');
    expect(be.sharedCommitCount()).toBe(0);
    put('c');
    expect(be.sharedCommitCount()).toBe(1);
    put('d');
    await be.flushed();
    expect(be.sharedCommitCount()).toBe(2);
    put('e');
    const snap = await be.openSnapshot();
    expect(be.sharedCommitCount()).toBe(3);
    const chunks: Buffer[] = [];
    for await (const c of snap.chunks) chunks.push(c);
    chunks.pop();
    const copyPath = tmpDb();
    fs.mkdirSync(path.dirname(copyPath), { recursive: true });
    fs.writeFileSync(copyPath, Buffer.concat(chunks));
    const copy = Backend.open(copyPath);
    expect(copy.subDb('s').getBinary(Buffer.from('e'))?.length).toBe(300);
    await copy.close();
    put('f');
    await be.defragment();
    expect(db.getBinary(Buffer.from('f'))?.length).toBe(300);
    put('g');
    await be.close();
    const be2 = Backend.open(p);
    for (const k of ['a', 'd', 'e', 'f', 'g']) expect(be2.subDb('s').getBinary(Buffer.from(k))?.length).toBe(300);
    await be2.close();
  });

  it('remaps from the background flush once the file has grown by 8 MiB', async () => {
    const p = tmpDb();
    const be = Backend.open(p, { flushIntervalMs: 5 });
    const db = be.subDb('d');
    for (let b = 0; b < 4; b++) {
      be.batch(() => {
        for (let i = b * 1000; i < (b + 1) * 1000; i++) db.putSync(Buffer.from(`k${i}`), Buffer.alloc(1000, 1));
      });
      await until(() => be.backgroundFlushCount() > b);
    }
    // ~4 MB: not yet.
    expect(be.remapCount()).toBe(0);
    for (let b = 4; b < 12; b++) {
      be.batch(() => {
        for (let i = b * 1000; i < (b + 1) * 1000; i++) db.putSync(Buffer.from(`k${i}`), Buffer.alloc(1000, 1));
      });
    }
    await until(() => be.remapCount() === 1);
    expect(residentMapKib(p)).toBeLessThan(4 * 1024);
    expect(db.getBinary(Buffer.from('k11999'))?.length).toBe(1000);
    await be.close();
  });
});
