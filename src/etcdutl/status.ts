// `etcdutl snapshot status`: hash, revision, number of records and size of a snapshot file. For a
// snapshot of etcd-ts the hash is the crc32c our Maintenance.Hash reports (equal for equal applied
// state); for a snapshot of etcd itself, etcd's own figures (the same hash etcdctl prints).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Backend, dbFileFormat } from '../backend/backend';
import { ETCD_STORAGE_VERSION } from '../config/version';
import { MvccStore } from '../mvcc/store';
import { Crc32c } from '../backend/crc32c';
import { KEY_DB } from '../mvcc';
import { bytesToRev } from '../mvcc/revision';
import { BboltReader } from '../backend/bbolt_reader';
import { EtcdutlError } from './errors';
import { copyVerifiedDb, hasChecksum } from './snapshot_file';

export interface SnapshotStatus {
  hash: number;
  revision: number;
  totalKey: number;
  totalSize: number;
  version: string;
}

export async function snapshotStatus(snapshotPath: string): Promise<SnapshotStatus> {
  if (!fs.existsSync(snapshotPath)) throw new EtcdutlError(`stat ${snapshotPath}: no such file or directory`);
  const format = dbFileFormat(snapshotPath);
  if (format === 'bbolt') return bboltStatus(snapshotPath);
  if (format !== 'lmdb') throw new EtcdutlError(`${snapshotPath} is not a snapshot file (no database header)`);
  // Read a private copy: opening the file itself would create LMDB's lock file next to it, and
  // the sha256 trailer is not part of the database.
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'etcdutl-status-'));
  try {
    const dbPath = path.join(dir, 'db');
    copyVerifiedDb(snapshotPath, dbPath, true);
    const totalSize = fs.statSync(dbPath).size;
    const backend = Backend.open(dbPath, { flushIntervalMs: 0 });
    try {
      let totalKey = 0;
      for (const name of backend.subDbNames()) totalKey += backend.subDb(name).getKeysCount({});
      const store = new MvccStore(backend);
      const revision = store.currentRevision();
      // A compaction the snapshot had scheduled is not this command's to run.
      await store.close();
      return { hash: backend.hash(), revision, totalKey, totalSize, version: ETCD_STORAGE_VERSION };
    } finally {
      await backend.close();
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * etcd's own status of a snapshot of etcd: crc32c over every bucket's name and its keys and values,
 * the revision of the last "key" record, the number of records, the database size.
 */
function bboltStatus(snapshotPath: string): SnapshotStatus {
  const reader = BboltReader.open(snapshotPath);
  try {
    const h = new Crc32c();
    let revision = 0;
    let totalKey = 0;
    let version = '';
    for (const name of reader.bucketNames()) {
      h.update(Buffer.from(name));
      for (const { key, value } of reader.entries(name)) {
        h.update(key);
        h.update(value);
        if (name === KEY_DB) revision = bytesToRev(key).main;
        if (name === 'meta' && key.toString() === 'storageVersion') version = value.toString();
        totalKey++;
      }
    }
    const size = fs.statSync(snapshotPath).size;
    return { hash: h.digest(), revision, totalKey, totalSize: hasChecksum(size) ? size - 32 : size, version };
  } finally {
    reader.close();
  }
}

/** Go's %.0f: halves round to the even neighbour (20.5 -> "20"), where toFixed rounds them up. */
function goRoundHalfEven(x: number): string {
  const fl = Math.floor(x);
  const diff = x - fl;
  const EPS = 1e-9;
  if (diff > 0.5 + EPS) return String(fl + 1);
  if (diff < 0.5 - EPS) return String(fl);
  return String(fl % 2 === 0 ? fl : fl + 1);
}

/** go-humanize's Bytes (SI units), as etcdctl prints a size. */
export function humanizeBytes(n: number): string {
  const units = ['B', 'kB', 'MB', 'GB', 'TB', 'PB', 'EB'];
  if (n < 10) return `${n} B`;
  const e = Math.floor(Math.log(n) / Math.log(1000));
  const val = Math.floor((n / Math.pow(1000, e)) * 10 + 0.5) / 10;
  return `${val < 10 ? val.toFixed(1) : goRoundHalfEven(val)} ${units[e]}`;
}

const HEADER = ['hash', 'revision', 'total keys', 'total size', 'version'];

function row(s: SnapshotStatus): string[] {
  return [s.hash.toString(16), String(s.revision), String(s.totalKey), humanizeBytes(s.totalSize), s.version];
}

/** The status in etcdutl's -w formats: simple (default), json, table, fields. */
export function formatStatus(s: SnapshotStatus, writeOut: string): string {
  switch (writeOut) {
    case 'simple':
      return row(s).join(', ') + '\n';
    case 'json':
      return JSON.stringify({ hash: s.hash, revision: s.revision, totalKey: s.totalKey, totalSize: s.totalSize, version: s.version }) + '\n';
    case 'fields':
      return `"Hash" : ${s.hash}\n"Revision" : ${s.revision}\n"Keys" : ${s.totalKey}\n"Size" : ${s.totalSize}\n"Version" : ${s.version}\n`;
    case 'table':
      return table(HEADER.map((h) => h.toUpperCase()), [row(s)]);
    default:
      throw new EtcdutlError(`unsupported output format "${writeOut}"`);
  }
}

/** olekukonko/tablewriter as etcdctl sets it up for this table: centred headers, every cell right-aligned. */
function table(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const line = '+' + widths.map((w) => '-'.repeat(w + 2)).join('+') + '+\n';
  const centre = (s: string, w: number): string => {
    const left = Math.floor((w - s.length) / 2);
    return ' '.repeat(left) + s + ' '.repeat(w - s.length - left);
  };
  const cell = (s: string, w: number): string => s.padStart(w);
  let out = line + '| ' + header.map((h, i) => centre(h, widths[i])).join(' | ') + ' |\n' + line;
  for (const r of rows) out += '| ' + r.map((c, i) => cell(c, widths[i])).join(' | ') + ' |\n';
  return out + line;
}
