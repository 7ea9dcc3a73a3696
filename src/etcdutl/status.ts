// `etcdutl snapshot status`: hash, revision, number of records and size of a snapshot file. The
// hash is the same crc32c our Maintenance.Hash reports over a database (equal for equal applied
// state), not etcd's (its records are bbolt's); compare it between snapshots of etcd-ts.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Backend, dbFileFormat } from '../backend/backend';
import { ETCD_STORAGE_VERSION } from '../config/version';
import { MvccStore } from '../mvcc/store';
import { copyVerifiedDb, SnapshotFileError } from './snapshot_file';

export interface SnapshotStatus {
  hash: number;
  revision: number;
  totalKey: number;
  totalSize: number;
  version: string;
}

export async function snapshotStatus(snapshotPath: string): Promise<SnapshotStatus> {
  if (!fs.existsSync(snapshotPath)) throw new SnapshotFileError(`stat ${snapshotPath}: no such file or directory`);
  const format = dbFileFormat(snapshotPath);
  if (format === 'bbolt') throw new SnapshotFileError(`${snapshotPath} is a bbolt database (a snapshot of etcd itself); this etcdutl reads snapshots of etcd-ts only`);
  if (format !== 'lmdb') throw new SnapshotFileError(`${snapshotPath} is not a snapshot file (no database header)`);
  // Read a private copy: opening the file itself would create LMDB's lock file next to it, and
  // the sha256 trailer is not part of the database.
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'etcdutl-status-'));
  try {
    const dbPath = path.join(dir, 'db');
    copyVerifiedDb(snapshotPath, dbPath, true);
    // Before opening: LMDB's write map extends the file to the map size (sparse).
    const totalSize = fs.statSync(dbPath).size;
    const backend = Backend.open(dbPath, { flushIntervalMs: 0 });
    try {
      let totalKey = 0;
      for (const name of backend.subDbNames()) totalKey += backend.subDb(name).getKeysCount({});
      const revision = new MvccStore(backend).currentRevision();
      return { hash: backend.hash(), revision, totalKey, totalSize, version: ETCD_STORAGE_VERSION };
    } finally {
      await backend.close();
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** go-humanize's Bytes (SI units), as etcdctl prints a size. */
export function humanizeBytes(n: number): string {
  const units = ['B', 'kB', 'MB', 'GB', 'TB', 'PB', 'EB'];
  if (n < 10) return `${n} B`;
  const e = Math.floor(Math.log(n) / Math.log(1000));
  const val = Math.floor((n / Math.pow(1000, e)) * 10 + 0.5) / 10;
  return `${val < 10 ? val.toFixed(1) : val.toFixed(0)} ${units[e]}`;
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
      throw new SnapshotFileError(`unsupported output format "${writeOut}"`);
  }
}

/** olekukonko/tablewriter's default look: centred headers, numbers right-aligned, text left. */
function table(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const line = '+' + widths.map((w) => '-'.repeat(w + 2)).join('+') + '+\n';
  const centre = (s: string, w: number): string => {
    const left = Math.floor((w - s.length) / 2);
    return ' '.repeat(left) + s + ' '.repeat(w - s.length - left);
  };
  const cell = (s: string, w: number): string => (/^-?\d+(\.\d+)?$/.test(s) ? s.padStart(w) : s.padEnd(w));
  let out = line + '| ' + header.map((h, i) => centre(h, widths[i])).join(' | ') + ' |\n' + line;
  for (const r of rows) out += '| ' + r.map((c, i) => cell(c, widths[i])).join(' | ') + ' |\n';
  return out + line;
}
