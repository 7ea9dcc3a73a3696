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

const PAGE_BYTES = 4096;
const FREELIST_PGID = 2;
const FIRST_DATA_PGID = 3;
/** bbolt's page element count is a u16. */
const MAX_ELEMENTS_PER_PAGE = 0xffff;
/** Pages written between yields to the event loop (a large store takes a while). */
const PAGES_PER_YIELD = 64;
const EMPTY = Buffer.alloc(0);

interface Element {
  key: Buffer;
  value: Buffer;
  /** Leaf: element flags; branch: the child page id. */
  extra: number;
}

export class BboltWriter {
  private readonly fd: number;
  private nextPgid = FIRST_DATA_PGID;
  private readonly buckets: Array<{ name: Buffer; root: number }> = [];
  private pagesSinceYield = 0;
  private finished = false;

  constructor(private readonly file: string) {
    this.fd = fs.openSync(file, 'wx', 0o600);
  }

  /** Writes one page (with overflow pages when its elements need them); returns its id. */
  private writePage(flags: number, elements: readonly Element[]): number {
    assert(elements.length <= MAX_ELEMENTS_PER_PAGE);
    let bytes = BBOLT_PAGE_HEADER_BYTES + elements.length * BBOLT_ELEMENT_BYTES;
    for (const e of elements) bytes += e.key.length + e.value.length;
    const pages = Math.max(1, Math.ceil(bytes / PAGE_BYTES));
    const buf = Buffer.alloc(pages * PAGE_BYTES);
    const id = this.nextPgid;
    this.nextPgid += pages;
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
    fs.writeSync(this.fd, buf, 0, buf.length, id * PAGE_BYTES);
    this.pagesSinceYield += pages;
    return id;
  }

  /** Packs elements into pages of one level; returns each page's first key and id. */
  private async writeLevel(flags: number, elements: Iterator<Element>): Promise<Element[]> {
    const parents: Element[] = [];
    let page: Element[] = [];
    let pageBytes = BBOLT_PAGE_HEADER_BYTES;
    let prev: Buffer | null = null;
    for (;;) {
      const next = elements.next();
      if (next.done) break;
      const e = next.value;
      if (prev !== null) assert(Buffer.compare(prev, e.key) < 0, 'bbolt keys must be strictly ascending');
      prev = e.key;
      const size = BBOLT_ELEMENT_BYTES + e.key.length + e.value.length;
      if (page.length > 0 && (pageBytes + size > PAGE_BYTES || page.length === MAX_ELEMENTS_PER_PAGE)) {
        parents.push({ key: page[0].key, value: EMPTY, extra: this.writePage(flags, page) });
        page = [];
        pageBytes = BBOLT_PAGE_HEADER_BYTES;
        if (this.pagesSinceYield >= PAGES_PER_YIELD) {
          this.pagesSinceYield = 0;
          await new Promise<void>((resolve) => setImmediate(resolve));
        }
      }
      page.push(e);
      pageBytes += size;
    }
    // The last page; an empty bucket is one empty leaf page.
    if (page.length > 0 || parents.length === 0) parents.push({ key: page[0]?.key ?? EMPTY, value: EMPTY, extra: this.writePage(flags, page) });
    return parents;
  }

  /**
   * Adds a top-level bucket; `entries` must come in strictly ascending key order (buckets may come
   * in any order), each key and value in a buffer of its own (a page holds them until it is
   * written, and first keys stay as branch keys).
   */
  async addBucket(name: string, entries: Iterable<[Buffer, Buffer]>): Promise<void> {
    assert(!this.finished);
    const nameBytes = Buffer.from(name);
    assert(!this.buckets.some((b) => b.name.equals(nameBytes)), `bucket ${name} added twice`);
    function* asElements(): Iterator<Element> {
      for (const [key, value] of entries) yield { key, value, extra: 0 };
    }
    let level = await this.writeLevel(BBOLT_LEAF_PAGE, asElements());
    while (level.length > 1) level = await this.writeLevel(BBOLT_BRANCH_PAGE, level[Symbol.iterator]());
    this.buckets.push({ name: nameBytes, root: level[0].extra });
  }

  /** Writes the root bucket, freelist and meta pages; returns the file's size in bytes. */
  finish(): number {
    assert(!this.finished);
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
