// Writes a bbolt database file (etcd's backend format) from buckets of sorted key/value pairs, so a
// snapshot of ours can be read by etcd's own tools (`etcdctl snapshot status/restore`) and restored
// into etcd. The file is built bottom-up in one pass per bucket: leaf pages filled in key order
// (an element larger than a page gets overflow pages), then branch levels over their first keys,
// then the root bucket's leaf, the (empty) freelist at page 2, and the two meta pages, so every
// page below the high-water mark is reachable exactly once (what bbolt's Tx.Check verifies).
// Layout: see bbolt_reader.ts.
import assert from 'node:assert';
import fs from 'node:fs';
import {
  BBOLT_PAGE_HEADER_BYTES,
  BBOLT_ELEMENT_BYTES,
  BBOLT_BRANCH_PAGE,
  BBOLT_LEAF_PAGE,
  BBOLT_META_PAGE,
  BBOLT_FREELIST_PAGE,
  BBOLT_BUCKET_LEAF_FLAG,
  BBOLT_BUCKET_HEADER_BYTES,
  BBOLT_MAGIC,
  BBOLT_VERSION,
  BBOLT_META_CHECKSUMMED_BYTES,
  fnv64a,
} from './bbolt_format';
import { nextTurn } from '../runtime/next_turn';

const PAGE_BYTES = 4096;
const FREELIST_PGID = 2;
const FIRST_DATA_PGID = 3;
/** bbolt's page element count is a u16. */
const MAX_ELEMENTS_PER_PAGE = 0xffff;
/** Pages written between yields to the event loop (a large store takes a while). */
const PAGES_PER_YIELD = 64;
/**
 * Pages gathered for one write: one write system call per 4 KiB page was a quarter of a 1M-key
 * snapshot's conversion (77k of them), and a fresh zeroed Buffer per page a third.
 */
const PENDING_BYTES = 1 << 20;
const EMPTY = Buffer.alloc(0);

interface Element {
  key: Buffer;
  value: Buffer;
  /** Leaf: element flags; branch: the child page id. */
  extra: number;
}

/** BboltWriter.beginBucket(): add() records in ascending key order, then end() once. */
export interface BucketBuilder {
  add(key: Buffer, value: Buffer, valueBytes: number): void;
  /** A turn of the event loop when enough pages were written since the last (a large bucket takes a while). */
  yieldIfDue(): Promise<void>;
  end(): Promise<void>;
}

/**
 * Gathers one leaf page's elements, copying their bytes into a reused arena, and hands the page
 * over when the next element would not fit.
 */
class LeafPacker {
  private arena = Buffer.allocUnsafe(2 * PAGE_BYTES);
  private used = 0;
  /** Key and value lengths of the elements gathered, in turn. */
  private readonly lengths: number[] = [];
  private pageBytes = BBOLT_PAGE_HEADER_BYTES;
  /** The last key added (a copy once its page is handed over), for the order check. */
  private lastKey: Buffer | null = null;
  private lastKeyAt = -1;

  constructor(private readonly writePage: (firstKeyAt: number, firstKeyLen: number, arena: Buffer, used: number, lengths: readonly number[]) => void) {}

  add(key: Buffer, value: Buffer, valueBytes: number): void {
    assert(valueBytes <= value.length);
    if (this.lastKeyAt >= 0) {
      const keyLen = this.lengths[this.lengths.length - 2]!;
      assert(key.compare(this.arena, this.lastKeyAt, this.lastKeyAt + keyLen) > 0, 'bbolt keys must be strictly ascending');
    } else if (this.lastKey !== null) assert(key.compare(this.lastKey) > 0, 'bbolt keys must be strictly ascending');
    const size = BBOLT_ELEMENT_BYTES + key.length + valueBytes;
    const count = this.lengths.length / 2;
    if (count > 0 && (this.pageBytes + size > PAGE_BYTES || count === MAX_ELEMENTS_PER_PAGE)) this.flush(false);
    const need = this.used + key.length + valueBytes;
    if (need > this.arena.length) {
      const grown = Buffer.allocUnsafe(Math.max(need, 2 * this.arena.length));
      this.arena.copy(grown, 0, 0, this.used);
      this.arena = grown;
    }
    this.lastKeyAt = this.used;
    key.copy(this.arena, this.used);
    this.used += key.length;
    // A view of exactly the value's bytes: a record view's Buffer may report a length that is not
    // its array's (lmdb-js's read buffer), which Buffer.copy and set() would go by.
    this.arena.set(new Uint8Array(value.buffer, value.byteOffset, valueBytes), this.used);
    this.used += valueBytes;
    this.lengths.push(key.length, valueBytes);
    this.pageBytes += size;
  }

  /** Hands over the page gathered so far (an empty one only if `evenEmpty`). */
  flush(evenEmpty: boolean): void {
    if (this.lengths.length === 0 && !evenEmpty) return;
    if (this.lastKeyAt >= 0) {
      const keyLen = this.lengths[this.lengths.length - 2]!;
      this.lastKey = Buffer.from(this.arena.subarray(this.lastKeyAt, this.lastKeyAt + keyLen));
    }
    this.writePage(0, this.lengths.length > 0 ? this.lengths[0]! : 0, this.arena, this.used, this.lengths);
    this.used = 0;
    this.lengths.length = 0;
    this.pageBytes = BBOLT_PAGE_HEADER_BYTES;
    this.lastKeyAt = -1;
    // A large element grew the arena: back to the usual size.
    if (this.arena.length > 2 * PAGE_BYTES) this.arena = Buffer.allocUnsafe(2 * PAGE_BYTES);
  }
}

export class BboltWriter {
  private readonly fd: number;
  private nextPgid = FIRST_DATA_PGID;
  private readonly buckets: Array<{ name: Buffer; root: number }> = [];
  private pagesSinceYield = 0;
  private finished = false;
  private building = false;
  /** Pages from pgid pendingPgid on, not yet written: pendingBytes bytes of `pending`. */
  private pending = Buffer.allocUnsafe(PENDING_BYTES);
  private pendingPgid = FIRST_DATA_PGID;
  private pendingBytes = 0;

  constructor(private readonly file: string) {
    this.fd = fs.openSync(file, 'wx', 0o600);
  }

  /** Writes one page (with overflow pages when its elements need them); returns its id. */
  private writePage(flags: number, elements: readonly Element[]): number {
    assert(elements.length <= MAX_ELEMENTS_PER_PAGE);
    let bytes = BBOLT_PAGE_HEADER_BYTES + elements.length * BBOLT_ELEMENT_BYTES;
    for (const e of elements) bytes += e.key.length + e.value.length;
    const pages = Math.max(1, Math.ceil(bytes / PAGE_BYTES));
    const id = this.nextPgid;
    this.nextPgid += pages;
    const buf = this.pageBuffer(id, pages);
    buf.writeBigUInt64LE(BigInt(id), 0);
    buf.writeUInt16LE(flags, 8);
    buf.writeUInt16LE(elements.length, 10);
    buf.writeUInt32LE(pages - 1, 12);
    let data = BBOLT_PAGE_HEADER_BYTES + elements.length * BBOLT_ELEMENT_BYTES;
    elements.forEach((e, i) => {
      const at = BBOLT_PAGE_HEADER_BYTES + i * BBOLT_ELEMENT_BYTES;
      if (flags === BBOLT_LEAF_PAGE) {
        buf.writeUInt32LE(e.extra, at);
        buf.writeUInt32LE(data - at, at + 4);
        buf.writeUInt32LE(e.key.length, at + 8);
        buf.writeUInt32LE(e.value.length, at + 12);
      } else {
        buf.writeUInt32LE(data - at, at);
        buf.writeUInt32LE(e.key.length, at + 4);
        buf.writeBigUInt64LE(BigInt(e.extra), at + 8);
      }
      e.key.copy(buf, data);
      data += e.key.length;
      e.value.copy(buf, data);
      data += e.value.length;
    });
    this.pagesSinceYield += pages;
    return id;
  }

  /** Zeroed room for `pages` pages from pgid `id` on, the pages before it all given out. */
  private pageBuffer(id: number, pages: number): Buffer {
    const bytes = pages * PAGE_BYTES;
    assert.equal(id, this.pendingPgid + this.pendingBytes / PAGE_BYTES, 'pages are written in order');
    if (this.pendingBytes + bytes > this.pending.length) this.flushPending();
    if (bytes > this.pending.length) {
      // An element larger than the buffer: its pages are written on their own.
      assert.equal(this.pendingBytes, 0);
      this.pending = Buffer.allocUnsafe(bytes);
    }
    const buf = this.pending.subarray(this.pendingBytes, this.pendingBytes + bytes);
    buf.fill(0);
    this.pendingBytes += bytes;
    return buf;
  }

  private flushPending(): void {
    let written = 0;
    while (written < this.pendingBytes) {
      written += fs.writeSync(this.fd, this.pending, written, this.pendingBytes - written, this.pendingPgid * PAGE_BYTES + written);
    }
    this.pendingPgid += this.pendingBytes / PAGE_BYTES;
    this.pendingBytes = 0;
    if (this.pending.length > PENDING_BYTES) this.pending = Buffer.allocUnsafe(PENDING_BYTES);
  }

  /** Packs one branch level over `children` (two or more) into pages; returns each page's first key and id. */
  private async writeBranches(children: readonly Element[]): Promise<Element[]> {
    assert(children.length > 1);
    const parents: Element[] = [];
    let page: Element[] = [];
    let pageBytes = BBOLT_PAGE_HEADER_BYTES;
    for (const e of children) {
      const size = BBOLT_ELEMENT_BYTES + e.key.length + e.value.length;
      if (page.length > 0 && (pageBytes + size > PAGE_BYTES || page.length === MAX_ELEMENTS_PER_PAGE)) {
        parents.push({ key: page[0].key, value: EMPTY, extra: this.writePage(BBOLT_BRANCH_PAGE, page) });
        page = [];
        pageBytes = BBOLT_PAGE_HEADER_BYTES;
        await this.yieldIfDue();
      }
      page.push(e);
      pageBytes += size;
    }
    parents.push({ key: page[0].key, value: EMPTY, extra: this.writePage(BBOLT_BRANCH_PAGE, page) });
    return parents;
  }

  /** A turn of the event loop once PAGES_PER_YIELD pages were written since the last (a large bucket takes a while). */
  private async yieldIfDue(): Promise<void> {
    if (this.pagesSinceYield < PAGES_PER_YIELD) return;
    this.pagesSinceYield = 0;
    await nextTurn();
  }

  /**
   * Adds a top-level bucket; `entries` must come in strictly ascending key order (buckets may come
   * in any order).
   */
  async addBucket(name: string, entries: Iterable<[Buffer, Buffer]>): Promise<void> {
    const bucket = this.beginBucket(name);
    for (const [key, value] of entries) {
      bucket.add(key, value, value.length);
      await bucket.yieldIfDue();
    }
    await bucket.end();
  }

  /**
   * Starts a top-level bucket filled by add() in strictly ascending key order; each key and
   * value is copied at once (they may be views of a buffer reused after the call), so a large
   * bucket costs no Buffer per record. end() writes its branch levels. One bucket at a time.
   */
  beginBucket(name: string): BucketBuilder {
    assert(!this.finished);
    assert(!this.building, 'a bucket begun before the last one ended');
    const nameBytes = Buffer.from(name);
    assert(!this.buckets.some((b) => b.name.equals(nameBytes)), `bucket ${name} added twice`);
    this.building = true;
    const leaves: Element[] = [];
    const leaf = new LeafPacker((keyAt, keyLen, arena, used, lengths) => {
      const firstKey = Buffer.from(arena.subarray(keyAt, keyAt + keyLen));
      leaves.push({ key: firstKey, value: EMPTY, extra: this.writeLeaf(arena, used, lengths) });
    });
    return {
      add: (key, value, valueBytes) => leaf.add(key, value, valueBytes),
      yieldIfDue: () => this.yieldIfDue(),
      end: async () => {
        // The last page; an empty bucket is one empty leaf page.
        leaf.flush(leaves.length === 0);
        let level = leaves;
        while (level.length > 1) level = await this.writeBranches(level);
        this.buckets.push({ name: nameBytes, root: level[0].extra });
        this.building = false;
      },
    };
  }

  /**
   * Writes one leaf page of plain key/value elements whose bytes lie back to back in
   * arena[0, used) (key, value, key, value...), `lengths` their key and value lengths in turn.
   */
  private writeLeaf(arena: Buffer, used: number, lengths: readonly number[]): number {
    const count = lengths.length / 2;
    assert(count <= MAX_ELEMENTS_PER_PAGE);
    const dataAt = BBOLT_PAGE_HEADER_BYTES + count * BBOLT_ELEMENT_BYTES;
    const pages = Math.max(1, Math.ceil((dataAt + used) / PAGE_BYTES));
    const id = this.nextPgid;
    this.nextPgid += pages;
    const buf = this.pageBuffer(id, pages);
    buf.writeBigUInt64LE(BigInt(id), 0);
    buf.writeUInt16LE(BBOLT_LEAF_PAGE, 8);
    buf.writeUInt16LE(count, 10);
    buf.writeUInt32LE(pages - 1, 12);
    let data = dataAt;
    for (let i = 0; i < count; i++) {
      const at = BBOLT_PAGE_HEADER_BYTES + i * BBOLT_ELEMENT_BYTES;
      const keyLen = lengths[2 * i]!;
      const valueLen = lengths[2 * i + 1]!;
      buf.writeUInt32LE(0, at);
      buf.writeUInt32LE(data - at, at + 4);
      buf.writeUInt32LE(keyLen, at + 8);
      buf.writeUInt32LE(valueLen, at + 12);
      data += keyLen + valueLen;
    }
    arena.copy(buf, dataAt, 0, used);
    this.pagesSinceYield += pages;
    return id;
  }

  /** Writes the root bucket, freelist and meta pages; returns the file's size in bytes. */
  finish(): number {
    assert(!this.finished);
    assert(!this.building, 'finished with a bucket not ended');
    this.finished = true;
    try {
      const sorted = [...this.buckets].sort((a, b) => Buffer.compare(a.name, b.name));
      const rootElements = sorted.map((b) => {
        const header = Buffer.alloc(BBOLT_BUCKET_HEADER_BYTES);
        header.writeBigUInt64LE(BigInt(b.root), 0);
        return { key: b.name, value: header, extra: BBOLT_BUCKET_LEAF_FLAG };
      });
      const root = this.writePage(BBOLT_LEAF_PAGE, rootElements);
      assert.equal(this.nextPgid, root + 1, 'the root bucket fits one page');
      this.flushPending();

      const freelist = Buffer.alloc(PAGE_BYTES);
      freelist.writeBigUInt64LE(BigInt(FREELIST_PGID), 0);
      freelist.writeUInt16LE(BBOLT_FREELIST_PAGE, 8);
      fs.writeSync(this.fd, freelist, 0, PAGE_BYTES, FREELIST_PGID * PAGE_BYTES);

      for (const pgid of [0, 1]) {
        const page = Buffer.alloc(PAGE_BYTES);
        page.writeBigUInt64LE(BigInt(pgid), 0);
        page.writeUInt16LE(BBOLT_META_PAGE, 8);
        const m = page.subarray(BBOLT_PAGE_HEADER_BYTES);
        m.writeUInt32LE(BBOLT_MAGIC, 0);
        m.writeUInt32LE(BBOLT_VERSION, 4);
        m.writeUInt32LE(PAGE_BYTES, 8);
        m.writeUInt32LE(0, 12);
        m.writeBigUInt64LE(BigInt(root), 16);
        m.writeBigUInt64LE(0n, 24);
        m.writeBigUInt64LE(BigInt(FREELIST_PGID), 32);
        m.writeBigUInt64LE(BigInt(this.nextPgid), 40);
        m.writeBigUInt64LE(BigInt(pgid), 48);
        m.writeBigUInt64LE(fnv64a(m.subarray(0, BBOLT_META_CHECKSUMMED_BYTES)), BBOLT_META_CHECKSUMMED_BYTES);
        fs.writeSync(this.fd, page, 0, PAGE_BYTES, pgid * PAGE_BYTES);
      }
      const size = this.nextPgid * PAGE_BYTES;
      assert.equal(fs.fstatSync(this.fd).size, size, 'bbolt file size is its page count');
      // No fsync: the file is streamed from the page cache and deleted (an fsync of a large file
      // on the event loop stalled every request for tens of milliseconds).
      return size;
    } finally {
      fs.closeSync(this.fd);
    }
  }

  /** Gives up: closes and removes the file. */
  abort(): void {
    if (!this.finished) {
      this.finished = true;
      fs.closeSync(this.fd);
    }
    fs.rmSync(this.file, { force: true });
  }
}
