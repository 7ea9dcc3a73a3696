// The go-grpc-prometheus counters in the default (non-extensive) mode, where calls are counted
// in plain numbers and added to the series before each scrape: a scraper must see the same
// values as with per-call increments, and nothing twice.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as grpc from '@grpc/grpc-js';
import { createMetrics, type EtcdMetrics } from '../../../src/metrics';
import { call, startHarness, waitFor, type Harness } from './harness';

let h: Harness;
let metrics: EtcdMetrics;
let text = '';

beforeAll(async () => {
  metrics = createMetrics({ serverVersion: '3.6.0', defaultMetrics: false });
  h = await startHarness({ grpc: { metrics, memberState: { refreshMs: 0, electionTimeoutMs: 50 } } });
});
afterAll(async () => {
  await h.close();
});

async function scrape(): Promise<string> {
  text = (await metrics.metricsText()).body;
  return text;
}

function value(name: string, labels: Record<string, string>): number | undefined {
  const want = Object.entries(labels)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([k, v]) => `${k}="${v}"`);
  for (const line of text.split('\n')) {
    const m = /^([a-z_]+)\{([^}]*)\} (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const got = m[2]!.split(',').sort();
    if (got.length === want.length && got.every((g, i) => g === want[i])) return Number(m[3]);
  }
  return undefined;
}

function bytes(name: string): number {
  return Number(new RegExp(`^${name} (\\d+)`, 'm').exec(text)?.[1] ?? NaN);
}

const kvLabels = (method: string) => ({ grpc_method: method, grpc_service: 'etcdserverpb.KV', grpc_type: 'unary' });

describe('gRPC server metrics, batched until scrape', () => {
  it('shows zero series first, then exact counts across several scrapes', async () => {
    await scrape();
    expect(value('grpc_server_started_total', kvLabels('Put'))).toBe(0);
    expect(text).not.toMatch(/grpc_server_handling_seconds/);
    const kv = h.client('etcdserverpb.KV');
    for (let i = 0; i < 3; i++) await call(kv, 'Put', { key: Buffer.from(`k${i}`), value: Buffer.from('v') });
    await expect(call(kv, 'Put', { key: Buffer.alloc(0), value: Buffer.from('v') })).rejects.toMatchObject({ code: grpc.status.INVALID_ARGUMENT });
    await scrape();
    expect(value('grpc_server_started_total', kvLabels('Put'))).toBe(4);
    expect(value('grpc_server_msg_received_total', kvLabels('Put'))).toBe(4);
    expect(value('grpc_server_msg_sent_total', kvLabels('Put'))).toBe(3);
    expect(value('grpc_server_handled_total', { ...kvLabels('Put'), grpc_code: 'OK' })).toBe(3);
    expect(value('grpc_server_handled_total', { ...kvLabels('Put'), grpc_code: 'InvalidArgument' })).toBe(1);
    const received = bytes('etcd_network_client_grpc_received_bytes_total');
    const sent = bytes('etcd_network_client_grpc_sent_bytes_total');
    expect(received).toBeGreaterThan(4 * 3);
    expect(sent).toBeGreaterThan(3 * 10);

    // A second scrape with nothing new adds nothing (the pending counts were consumed).
    await scrape();
    expect(value('grpc_server_started_total', kvLabels('Put'))).toBe(4);
    expect(bytes('etcd_network_client_grpc_received_bytes_total')).toBe(received);

    await call(kv, 'Range', { key: Buffer.from('k0') });
    await call(kv, 'Put', { key: Buffer.from('k9'), value: Buffer.from('v') });
    await scrape();
    expect(value('grpc_server_started_total', kvLabels('Put'))).toBe(5);
    expect(value('grpc_server_handled_total', { ...kvLabels('Range'), grpc_code: 'OK' })).toBe(1);
    expect(bytes('etcd_network_client_grpc_sent_bytes_total')).toBeGreaterThan(sent);
  });

  it('counts a watch stream and its cancellation', async () => {
    const labels = { grpc_method: 'Watch', grpc_service: 'etcdserverpb.Watch', grpc_type: 'bidi_stream' };
    const w = h.client('etcdserverpb.Watch') as unknown as { Watch(): grpc.ClientDuplexStream<unknown, unknown> };
    const stream = w.Watch();
    const got: unknown[] = [];
    stream.on('data', (d) => got.push(d));
    stream.on('error', () => undefined);
    stream.write({ createRequest: { key: Buffer.from('w') } });
    await waitFor(() => got.length >= 1, 5000, 'watch created');
    await scrape();
    expect(value('grpc_server_started_total', labels)).toBe(1);
    expect(value('grpc_server_msg_sent_total', labels)).toBe(1);
    stream.cancel();
    const deadline = Date.now() + 5000;
    while (value('grpc_server_handled_total', { ...labels, grpc_code: 'Canceled' }) !== 1 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 10));
      await scrape();
    }
    expect(value('grpc_server_handled_total', { ...labels, grpc_code: 'Canceled' })).toBe(1);
  });
});
