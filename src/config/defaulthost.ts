// etcd's default host: the IPv4 address of the interface that carries the default route. etcd
// advertises it instead of "localhost" when it listens on 0.0.0.0 with default advertise URLs.

import fs from 'node:fs';
import os from 'node:os';

const ROUTE_TABLE = '/proc/net/route';

export function defaultHostFromRoutes(): string | undefined {
  let table: string;
  try {
    table = fs.readFileSync(ROUTE_TABLE, 'utf8');
  } catch {
    return undefined;
  }
  for (const line of table.split('\n').slice(1)) {
    const cols = line.trim().split(/\s+/);
    if (cols.length < 2 || cols[1] !== '00000000') continue;
    const addrs = os.networkInterfaces()[cols[0]] ?? [];
    const v4 = addrs.find((a) => a.family === 'IPv4');
    if (v4 !== undefined) return v4.address;
  }
  return undefined;
}
