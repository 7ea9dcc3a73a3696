// The series that move with what a member does, scraped from /metrics of a running server with
// etcdctl as the client: WAL bytes and write time, slow applies (with --warning-apply-duration
// set below any apply, so every request is "slow" and logged as etcd logs it), defragmentation,
// hashes, snapshot transfers, compaction, bytes put, watch streams and the events they carried.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { etcdctl } from '../helpers/etcdctl';
import { startEtcd, type EtcdMember } from '../helpers/etcd-process';
import { EtcdGrpc, StreamReader } from '../helpers/grpc';
import { sampleValue, scrapeMetrics } from '../helpers/prom';
import { waitFor } from '../helpers/wait';
import fs from 'node:fs';
import http2 from 'node:http2';
import os from 'node:os';
import path from 'node:path';

let m: EtcdMember;
let tmp: string;

beforeAll(async () => {
  m = await startEtcd({ args: ['--warning-apply-duration=1ns'] });
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'metrics-activity-'));
}, 60_000);

afterAll(async () => {
  await m?.stop();
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
}, 30_000);

const scrape = (): Promise<string> => scrapeMetrics(m.clientUrl);
const value = sampleValue;

async function ctl(...args: string[]): Promise<string> {
  const r = await etcdctl(args, { endpoint: m.clientHostPort, timeoutMs: 15_000 });
  expect(r.code, r.stderr).toBe(0);
  return r.stdout;
}

describe('metrics that follow activity (one member, etcdctl)', () => {
  it('count WAL bytes, time WAL writes, and add up the bytes put', async () => {
    const before = await scrape();
    const walBefore = value(before, 'etcd_disk_wal_write_bytes_total') ?? 0;
    const putBefore = value(before, 'etcd_debugging_mvcc_total_put_size_in_bytes') ?? 0;
    const writesBefore = value(before, 'etcd_disk_wal_write_duration_seconds_count') ?? 0;
    for (let i = 0; i < 5; i++) await ctl('put', `wal/${i}`, 'x'.repeat(1000));
    const after = await scrape();
    // Each put's entry carries its 1000-byte value through the WAL at least once.
    expect((value(after, 'etcd_disk_wal_write_bytes_total') ?? 0) - walBefore).toBeGreaterThan(5 * 1000);
    expect((value(after, 'etcd_disk_wal_write_duration_seconds_count') ?? 0) - writesBefore).toBeGreaterThanOrEqual(5);
    // Key and value bytes, as etcd counts them: 5 x (5 + 1000).
    expect((value(after, 'etcd_debugging_mvcc_total_put_size_in_bytes') ?? 0) - putBefore).toBe(5 * 1005);
  }, 60_000);

  it('log and count applies and read-only ranges slower than --warning-apply-duration', async () => {
    const before = value(await scrape(), 'etcd_server_slow_apply_total') ?? 0;
    await ctl('put', 'slow/key', 'some-value');
    await ctl('get', 'slow/key');
    const after = value(await scrape(), 'etcd_server_slow_apply_total') ?? 0;
    expect(after - before).toBeGreaterThanOrEqual(2);
    const warnings = (): Array<Record<string, unknown>> =>
      m
        .logs()
        .split('\n')
        .filter((l) => l.includes('"apply request took too long"'))
        .map((l) => JSON.parse(l) as Record<string, unknown>);
    const isRead = (l: Record<string, unknown>): boolean => l.prefix === 'read-only range ' && String(l.request).startsWith('key:"slow/key"');
    // Log lines come through the child's stderr pipe, which may be read after the scrape's answer.
    const lines = await waitFor('both warnings in the log', () => {
      const ls = warnings();
      return ls.some(isRead) && ls.some((l) => String(l.request).includes('put:<key:"slow/key"')) ? ls : undefined;
    });
    const put = lines.find((l) => String(l.request).includes('put:<key:"slow/key" value_size:10 '));
    expect(put, 'a warning for the put').toBeDefined();
    expect(put!.level).toBe('warn');
    expect(put!['expected-duration']).toBe('1ns');
    expect(put!.prefix).toBe('');
    // The value itself is never logged.
    expect(JSON.stringify(lines)).not.toContain('some-value');
    const range = lines.find(isRead);
    expect(range, 'a warning for the read').toBeDefined();
    expect(range!.response).toBe('range_response_count:1');
  }, 60_000);

  it('time defragmentation and hashes, and say no defragmentation is running afterwards', async () => {
    const c = new EtcdGrpc(m.clientHostPort);
    try {
      await ctl('defrag');
      await c.unary('Maintenance', 'Hash', {});
      await c.unary('Maintenance', 'HashKV', { revision: 0 });
      await c.unary('Maintenance', 'HashKV', { revision: 0 });
    } finally {
      c.close();
    }
    const text = await scrape();
    expect(value(text, 'etcd_disk_backend_defrag_duration_seconds_count')).toBe(1);
    expect(value(text, 'etcd_disk_defrag_inflight')).toBe(0);
    expect(value(text, 'etcd_mvcc_hash_duration_seconds_count')).toBe(1);
    expect(value(text, 'etcd_mvcc_hash_rev_duration_seconds_count')).toBe(2);
  }, 60_000);

  it('time a snapshot transfer', async () => {
    await ctl('snapshot', 'save', path.join(tmp, 'snap.db'));
    const text = await scrape();
    expect(value(text, 'etcd_disk_backend_snapshot_duration_seconds_count')).toBe(1);
    expect(value(text, 'etcd_disk_backend_snapshot_duration_seconds_sum')).toBeGreaterThan(0);
  }, 60_000);

  it('count the records a compaction removed and when it finished', async () => {
    for (let i = 0; i < 10; i++) await ctl('put', 'compact/k', String(i));
    const rev = Number(/"revision":(\d+)/.exec(await ctl('get', 'compact/k', '-w', 'json'))![1]);
    const startSec = Math.floor(Date.now() / 1000);
    await ctl('compaction', '--physical', String(rev));
    const text = await waitFor('the compaction counted', async () => {
      const t = await scrape();
      return (value(t, 'etcd_debugging_mvcc_db_compaction_keys_total') ?? 0) > 0 ? t : undefined;
    });
    // At least the 9 older revisions of compact/k.
    expect(value(text, 'etcd_debugging_mvcc_db_compaction_keys_total')).toBeGreaterThanOrEqual(9);
    expect(value(text, 'etcd_debugging_mvcc_db_compaction_last')).toBeGreaterThanOrEqual(startSec);
  }, 60_000);

  it('count open watch streams and the events sent on them', async () => {
    const c = new EtcdGrpc(m.clientHostPort);
    const before = await scrape();
    const eventsBefore = value(before, 'etcd_debugging_mvcc_events_total') ?? 0;
    const streamsBefore = value(before, 'etcd_debugging_mvcc_watch_stream_total') ?? 0;
    const stream = c.bidi('Watch', 'Watch');
    const reader = new StreamReader(stream);
    try {
      stream.write({ create_request: { key: Buffer.from('w/'), range_end: Buffer.from('w0') } });
      expect((await reader.next()).created).toBe(true);
      expect(value(await scrape(), 'etcd_debugging_mvcc_watch_stream_total')).toBe(streamsBefore + 1);
      for (let i = 0; i < 3; i++) await ctl('put', `w/${i}`, 'v');
      let events = 0;
      while (events < 3) events += ((await reader.next()).events as unknown[]).length;
      expect((value(await scrape(), 'etcd_debugging_mvcc_events_total') ?? 0) - eventsBefore).toBe(3);
    } finally {
      stream.cancel();
      c.close();
    }
    await waitFor('the stream closed on the server', async () => value(await scrape(), 'etcd_debugging_mvcc_watch_stream_total') === streamsBefore);
  }, 60_000);

  it('count a watch stream whose request cannot be read, and log it as etcd does', async () => {
    const failures = (text: string): number => sampleValue(text, 'etcd_network_server_stream_failures_total', { API: 'watch', Type: 'receive' }) ?? 0;
    const before = failures(await scrape());
    const session = http2.connect(m.clientUrl);
    try {
      const req = session.request({ ':method': 'POST', ':path': '/etcdserverpb.Watch/Watch', 'content-type': 'application/grpc', te: 'trailers' });
      const status = new Promise<string>((resolve, reject) => {
        req.on('response', (h) => h['grpc-status'] !== undefined && resolve(String(h['grpc-status'])));
        req.on('trailers', (t) => resolve(String(t['grpc-status'])));
        req.on('error', reject);
      });
      req.on('data', () => undefined);
      // One gRPC message whose body is no WatchRequest: field 1 with wire type 7, which does not exist.
      const body = Buffer.from([0x0f, 0xff, 0xff]);
      req.write(Buffer.concat([Buffer.from([0, 0, 0, 0, body.length]), body]));
      expect(await status).toBe(String(13)); // INTERNAL, as grpc-js answers
    } finally {
      session.close();
    }
    expect(failures(await scrape()) - before).toBe(1);
    await waitFor('the warning in the log', () => m.logs().includes('"failed to receive watch request from gRPC stream"'));
  }, 60_000);

  it("count calls by kind and the client's API version", async () => {
    const labelled = (text: string, type: string, version: string): number =>
      sampleValue(text, 'etcd_server_client_requests_total', { type, client_api_version: version }) ?? 0;
    const before = await scrape();
    // etcdctl 3.4 sends client-api-version 3.4 on every call; the grpc-js client of the tests sends none.
    await ctl('put', 'ver/k', 'v');
    await ctl('get', 'ver/k');
    const c = new EtcdGrpc(m.clientHostPort);
    const stream = c.bidi('Watch', 'Watch');
    const reader = new StreamReader(stream);
    try {
      stream.write({ create_request: { key: Buffer.from('ver/k') } });
      expect((await reader.next()).created).toBe(true);
      const after = await scrape();
      expect(labelled(after, 'unary', '3.4') - labelled(before, 'unary', '3.4')).toBeGreaterThanOrEqual(2);
      expect(labelled(after, 'stream', 'unknown') - labelled(before, 'stream', 'unknown')).toBe(1);
    } finally {
      stream.cancel();
      c.close();
    }
  }, 60_000);
});
