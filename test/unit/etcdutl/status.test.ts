import { describe, expect, it } from 'vitest';
import { formatStatus, humanizeBytes } from '../../../src/etcdutl/status';
import { hasChecksum } from '../../../src/etcdutl/snapshot_file';

describe('etcdutl snapshot status output', () => {
  it('prints sizes as go-humanize does (SI units, one decimal below 10)', () => {
    const cases: Array<[number, string]> = [
      [0, '0 B'],
      [9, '9 B'],
      [10, '10 B'],
      [999, '999 B'],
      [1000, '1.0 kB'],
      [1549, '1.5 kB'],
      [65536, '66 kB'],
      [20480, '20 kB'],
      [21504, '22 kB'],
      [2_100_000, '2.1 MB'],
      [8_589_934_592, '8.6 GB'],
    ];
    for (const [n, s] of cases) expect(humanizeBytes(n), String(n)).toBe(s);
  });

  it('prints the table, simple, json and fields formats', () => {
    const st = { hash: 0xfe01cf57, revision: 10, totalKey: 7, totalSize: 2_100_000, version: '3.6.0' };
    expect(formatStatus(st, 'table')).toBe(
      '+----------+----------+------------+------------+---------+\n' +
        '|   HASH   | REVISION | TOTAL KEYS | TOTAL SIZE | VERSION |\n' +
        '+----------+----------+------------+------------+---------+\n' +
        '| fe01cf57 |       10 |          7 |     2.1 MB |   3.6.0 |\n' +
        '+----------+----------+------------+------------+---------+\n',
    );
    expect(formatStatus(st, 'simple')).toBe('fe01cf57, 10, 7, 2.1 MB, 3.6.0\n');
    expect(JSON.parse(formatStatus(st, 'json'))).toEqual({ hash: 0xfe01cf57, revision: 10, totalKey: 7, totalSize: 2_100_000, version: '3.6.0' });
    expect(formatStatus(st, 'fields')).toBe('"Hash" : 4261531479\n"Revision" : 10\n"Keys" : 7\n"Size" : 2100000\n"Version" : 3.6.0\n');
    expect(() => formatStatus(st, 'yaml')).toThrow('unsupported output format "yaml"');
  });

  it('tells a snapshot with its sha256 from a bare database by size, as etcd does', () => {
    expect(hasChecksum(4096 * 16 + 32)).toBe(true);
    expect(hasChecksum(4096 * 16)).toBe(false);
  });
});
