// A snapshot file as `etcdctl snapshot save` writes it from our Maintenance.Snapshot stream: the
// LMDB database file, then the sha256 of those bytes (32 bytes). A database copied straight out of
// a data directory has no trailer; etcd tells the two apart by size (a database is a whole number of
// 512-byte sectors, so size % 512 == 32 means a trailer) and so do we.
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import { EtcdutlError } from './errors';

const SHA256_BYTES = 32;
const SECTOR_BYTES = 512;
const COPY_CHUNK_BYTES = 1024 * 1024;


/** etcd's hasChecksum: a trailer is there when the size is 32 past a sector boundary. */
export function hasChecksum(sizeBytes: number): boolean {
  return sizeBytes % SECTOR_BYTES === SHA256_BYTES;
}

/**
 * Copies the database part of `snapshotPath` to `dbPath` (created, must not exist) and fsyncs it.
 * Checks the sha256 trailer unless `skipHashCheck`; without a trailer, only `skipHashCheck` lets
 * the copy through (etcd's rule: a database copied from a data directory must be asked for).
 */
export function copyVerifiedDb(snapshotPath: string, dbPath: string, skipHashCheck: boolean): void {
  const size = fs.statSync(snapshotPath).size;
  const withHash = hasChecksum(size);
  if (!withHash && !skipHashCheck) throw new EtcdutlError('snapshot missing hash but --skip-hash-check=false');
  const dbBytes = withHash ? size - SHA256_BYTES : size;
  const src = fs.openSync(snapshotPath, 'r');
  const dst = fs.openSync(dbPath, 'wx', 0o600);
  try {
    const sha = createHash('sha256');
    const buf = Buffer.allocUnsafe(COPY_CHUNK_BYTES);
    let at = 0;
    while (at < dbBytes) {
      const want = Math.min(buf.length, dbBytes - at);
      const n = fs.readSync(src, buf, 0, want, at);
      if (n === 0) throw new EtcdutlError(`snapshot file ${snapshotPath} ended at ${at} of ${dbBytes} bytes`);
      const chunk = buf.subarray(0, n);
      sha.update(chunk);
      fs.writeSync(dst, chunk, 0, n, at);
      at += n;
    }
    if (withHash && !skipHashCheck) {
      const expected = Buffer.alloc(SHA256_BYTES);
      fs.readSync(src, expected, 0, SHA256_BYTES, dbBytes);
      const got = sha.digest();
      if (!got.equals(expected)) throw new EtcdutlError(`expected sha256 ${goBytes(expected)}, got ${goBytes(got)}`);
    }
    fs.fsyncSync(dst);
  } finally {
    fs.closeSync(src);
    fs.closeSync(dst);
  }
}

/** Go's %v of a []byte, as etcd's hash mismatch message prints both sums. */
function goBytes(b: Buffer): string {
  return `[${[...b].join(' ')}]`;
}
