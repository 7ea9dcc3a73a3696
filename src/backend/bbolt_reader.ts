// A read-only reader of bbolt database files (etcd's backend, and what `etcdctl snapshot save`
// writes from etcd), enough to walk the top-level buckets etcd keeps and their key/value pairs.
// Layout (go.etcd.io/bbolt): fixed-size pages, each with a 16-byte header {id u64, flags u16,
// count u16, overflow u32}; pages 0 and 1 are meta pages (the valid one with the higher txid wins);
// a bucket is a B+tree of branch pages (elements {pos u32, ksize u32, pgid u64}) and leaf pages
// (elements {flags u32, pos u32, ksize u32, vsize u32}); a leaf element flagged as a bucket holds
// {root pgid u64, sequence u64}, followed by the bucket's page itself when root is 0 (inline).
import assert from 'node:assert';
import fs from 'node:fs';
import {
  BBOLT_PAGE_HEADER_BYTES,
  BBOLT_ELEMENT_BYTES,
  BBOLT_BRANCH_PAGE,
  BBOLT_LEAF_PAGE,
  BBOLT_META_PAGE,
  BBOLT_BUCKET_LEAF_FLAG,
  BBOLT_BUCKET_HEADER_BYTES,
  BBOLT_MAGIC,
  BBOLT_VERSION,
  BBOLT_META_CHECKSUMMED_BYTES,
  fnv64a,
} from './bbolt_format';

const MAX_PAGE_BYTES = 64 * 1024;
/** A B+tree deeper than this is a damaged file (bbolt's are a handful of levels). */
const MAX_DEPTH = 64;

export class BboltError extends Error {}

interface Meta {
  pageSize: number;
  rootPgid: number;
  highWaterPgid: number;
  txid: bigint;
}

export interface BboltEntry {
  key: Buffer;
  value: Buffer;
}

function safeU64(buf: Buffer, at: number, what: string): number {
  const v = buf.readBigUInt64LE(at);
  if (v > BigInt(Number.MAX_SAFE_INTEGER)) throw new BboltError(`${what} ${v} out of range`);
  return Number(v);
}

function readMeta(page: Buffer): Meta | null {
  if (page.length < BBOLT_PAGE_HEADER_BYTES + BBOLT_META_CHECKSUMMED_BYTES + 8) return null;
  if ((page.readUInt16LE(8) & BBOLT_META_PAGE) === 0) return null;
  const m = page.subarray(BBOLT_PAGE_HEADER_BYTES);
  if (m.readUInt32LE(0) !== BBOLT_MAGIC || m.readUInt32LE(4) !== BBOLT_VERSION) return null;
  if (fnv64a(m.subarray(0, BBOLT_META_CHECKSUMMED_BYTES)) !== m.readBigUInt64LE(BBOLT_META_CHECKSUMMED_BYTES)) return null;
  return {
    pageSize: m.readUInt32LE(8),
    rootPgid: safeU64(m, 16, 'root page'),
    highWaterPgid: safeU64(m, 40, 'page count'),
    txid: m.readBigUInt64LE(48),
  };
}

export class BboltReader {
  private constructor(
    private readonly fd: number,
    private readonly meta: Meta,
    private readonly fileBytes: number,
  ) {}

  static open(file: string): BboltReader {
    const fd = fs.openSync(file, 'r');
    try {
      const fileBytes = fs.fstatSync(fd).size;
      const first = Buffer.alloc(Math.min(4096, fileBytes));
      fs.readSync(fd, first, 0, first.length, 0);
      const m0 = readMeta(first);
      const pageSize = m0?.pageSize ?? (first.length >= BBOLT_PAGE_HEADER_BYTES + 12 ? first.readUInt32LE(BBOLT_PAGE_HEADER_BYTES + 8) : 0);
      if (!(pageSize >= 512 && pageSize <= MAX_PAGE_BYTES && (pageSize & (pageSize - 1)) === 0)) {
        throw new BboltError(`${file}: not a bbolt database (page size ${pageSize})`);
      }
      const second = Buffer.alloc(pageSize);
      const n = fs.readSync(fd, second, 0, pageSize, pageSize);
      const m1 = n === pageSize ? readMeta(second) : null;
      const meta = m0 && (!m1 || m0.txid >= m1.txid) ? m0 : m1;
      if (!meta) throw new BboltError(`${file}: both bbolt meta pages are invalid`);
      return new BboltReader(fd, meta, fileBytes);
    } catch (e) {
      fs.closeSync(fd);
      throw e;
    }
  }

  close(): void {
    fs.closeSync(this.fd);
  }

  /** The page `id` with its overflow pages. */
  private page(id: number): Buffer {
    const size = this.meta.pageSize;
    if (!(id >= 2 && id < this.meta.highWaterPgid)) throw new BboltError(`page ${id} outside the database (${this.meta.highWaterPgid} pages)`);
    if ((id + 1) * size > this.fileBytes) throw new BboltError(`page ${id} is past the end of the file (${this.fileBytes} bytes): the file is cut short`);
    const head = Buffer.alloc(BBOLT_PAGE_HEADER_BYTES);
    fs.readSync(this.fd, head, 0, BBOLT_PAGE_HEADER_BYTES, id * size);
    if (safeU64(head, 0, 'page id') !== id) throw new BboltError(`page ${id} has id ${head.readBigUInt64LE(0)}`);
    const bytes = (head.readUInt32LE(12) + 1) * size;
    if (id * size + bytes > this.fileBytes) throw new BboltError(`page ${id} runs past the end of the file`);
    const buf = Buffer.alloc(bytes);
    fs.readSync(this.fd, buf, 0, bytes, id * size);
    return buf;
  }

  /** Leaf elements of the B+tree whose root page is `page`, in key order. */
  private *walk(page: Buffer, depth: number): Generator<{ key: Buffer; value: Buffer; flags: number }> {
    if (depth > MAX_DEPTH) throw new BboltError('bbolt tree too deep');
    const flags = page.readUInt16LE(8);
    const count = page.readUInt16LE(10);
    for (let i = 0; i < count; i++) {
      const at = BBOLT_PAGE_HEADER_BYTES + i * BBOLT_ELEMENT_BYTES;
      if (at + BBOLT_ELEMENT_BYTES > page.length) throw new BboltError('bbolt page element out of bounds');
      if (flags & BBOLT_BRANCH_PAGE) {
        yield* this.walk(this.page(safeU64(page, at + 8, 'child page')), depth + 1);
      } else if (flags & BBOLT_LEAF_PAGE) {
        const eflags = page.readUInt32LE(at);
        const pos = page.readUInt32LE(at + 4);
        const ksize = page.readUInt32LE(at + 8);
        const vsize = page.readUInt32LE(at + 12);
        const kAt = at + pos;
        if (kAt + ksize + vsize > page.length) throw new BboltError('bbolt leaf element out of bounds');
        yield { key: page.subarray(kAt, kAt + ksize), value: page.subarray(kAt + ksize, kAt + ksize + vsize), flags: eflags };
      } else {
        throw new BboltError(`unexpected bbolt page flags ${flags}`);
      }
    }
  }

  /** Names of the top-level buckets. */
  bucketNames(): string[] {
    const names: string[] = [];
    for (const e of this.walk(this.page(this.meta.rootPgid), 0)) if (e.flags & BBOLT_BUCKET_LEAF_FLAG) names.push(e.key.toString());
    return names;
  }

  /** Key/value pairs of the top-level bucket `name` in key order (nested buckets skipped); none if it does not exist. */
  *entries(name: string): Generator<BboltEntry> {
    for (const e of this.walk(this.page(this.meta.rootPgid), 0)) {
      if (!(e.flags & BBOLT_BUCKET_LEAF_FLAG) || e.key.toString() !== name) continue;
      assert(e.value.length >= BBOLT_BUCKET_HEADER_BYTES, 'bbolt bucket header truncated');
      const root = safeU64(e.value, 0, 'bucket root');
      const tree = root === 0 ? e.value.subarray(BBOLT_BUCKET_HEADER_BYTES) : this.page(root);
      for (const kv of this.walk(tree, 1)) {
        if (kv.flags & BBOLT_BUCKET_LEAF_FLAG) continue;
        yield { key: Buffer.from(kv.key), value: Buffer.from(kv.value) };
      }
      return;
    }
  }
}
