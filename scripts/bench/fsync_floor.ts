// The disk's fdatasync floor, measured where the servers keep their data: the target for
// one client's put is "within 2x of the fsync floor at p50", and on these VMs that floor moves
// between runs (0.14-0.42 ms at p50 over a day), so each repeat measures it beside its own puts.
import assert from 'node:assert';
import fs from 'node:fs';
import path from 'node:path';

export interface FsyncFloor {
  /** Appends made, each followed by its own fdatasync. */
  writes: number;
  recordBytes: number;
  p50Us: number;
  p99Us: number;
}

/** Bounds, so a slow or broken disk cannot make the battery's set-up run for long. */
const MAX_WRITES = 10_000;
const MAX_RECORD_BYTES = 64 * 1024;

/**
 * Appends of `recordBytes` (a one-key put's WAL record is ~350 B), each followed by fdatasync,
 * into a file zero-filled ahead of them: the WAL keeps its segment zero-filled ahead of its
 * records too, so its fdatasyncs flush data only, not a new file size. The file is removed.
 */
export function measureFsyncFloor(dir: string, writes = 2000, recordBytes = 350): FsyncFloor {
  assert(Number.isInteger(writes) && writes > 0 && writes <= MAX_WRITES, `fsync floor: writes must be 1..${MAX_WRITES}`);
  assert(Number.isInteger(recordBytes) && recordBytes > 0 && recordBytes <= MAX_RECORD_BYTES, 'fsync floor: bad record size');
  fs.mkdirSync(dir, { recursive: true });
  const file = path.join(dir, `fsync-floor.${process.pid}.tmp`);
  const fd = fs.openSync(file, 'w');
  try {
    const total = writes * recordBytes;
    const zeros = Buffer.alloc(Math.min(total, 1 << 20));
    for (let off = 0; off < total; off += zeros.length) fs.writeSync(fd, zeros, 0, Math.min(zeros.length, total - off), off);
    fs.fsyncSync(fd);
    const record = Buffer.alloc(recordBytes, 0x5a);
    const us: number[] = [];
    for (let i = 0; i < writes; i++) {
      const t0 = process.hrtime.bigint();
      fs.writeSync(fd, record, 0, recordBytes, i * recordBytes);
      fs.fdatasyncSync(fd);
      us.push(Number(process.hrtime.bigint() - t0) / 1000);
    }
    us.sort((a, b) => a - b);
    const at = (q: number): number => us[Math.min(us.length - 1, Math.ceil(q * us.length) - 1)]!;
    return { writes, recordBytes, p50Us: at(0.5), p99Us: at(0.99) };
  } finally {
    fs.closeSync(fd);
    fs.rmSync(file, { force: true });
  }
}
