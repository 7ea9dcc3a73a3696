// The go-grpc-prometheus series as a scraper sees them after real gRPC calls.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as grpc from '@grpc/grpc-js';
import { createMetrics, type EtcdMetrics } from '../../../src/metrics';
import { call, startHarness, waitFor, type Harness } from './harness';

let h: Harness;
let metrics: EtcdMetrics;
let text = '';

beforeAll(async () => {
  metrics = createMetrics({ serverVersion: '3.6.0', extensive: true, defaultMetrics: false });
  h = await startHarness({ grpc: { metrics, memberState: { refreshMs: 0, electionTimeoutMs: 50 } } });
});
afterAll(async () => {
  await h.close();
});

async function scrape(): Promise<string> {
  text = (await metrics.metricsText()).body;
  return text;
}

/** The value of one series, or undefined when absent. */
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

const kvLabels = (method: string) => ({ grpc_method: method, grpc_service: 'etcdserverpb.KV', grpc_type: 'unary' });

describe('gRPC server metrics', () => {
  it('pre-creates zero series for every etcd method and code', async () => {
    await scrape();
    expect(value('grpc_server_started_total', kvLabels('Range'))).toBe(0);
    expect(value('grpc_server_handled_total', { ...kvLabels('Txn'), grpc_code: 'Unavailable' })).toBe(0);
    expect(value('grpc_server_started_total', { grpc_method: 'Watch', grpc_service: 'etcdserverpb.Watch', grpc_type: 'bidi_stream' })).toBe(0);
  });

  it('counts unary calls by method and code, with messages, latency and wire bytes', async () => {
    const kv = h.client('etcdserverpb.KV');
    for (let i = 0; i < 3; i++) await call(kv, 'Put', { key: Buffer.from(`k${i}`), value: Buffer.from('v') });
    await call(kv, 'Range', { key: Buffer.from('k0') });
    // An empty key is refused by the API layer with InvalidArgument.
    await expect(call(kv, 'Put', { key: Buffer.alloc(0), value: Buffer.from('v') })).rejects.toMatchObject({ code: grpc.status.INVALID_ARGUMENT });
    await scrape();
    expect(value('grpc_server_started_total', kvLabels('Put'))).toBe(4);
    expect(value('grpc_server_handled_total', { ...kvLabels('Put'), grpc_code: 'OK' })).toBe(3);
    expect(value('grpc_server_handled_total', { ...kvLabels('Put'), grpc_code: 'InvalidArgument' })).toBe(1);
    expect(value('grpc_server_msg_received_total', kvLabels('Put'))).toBe(4);
    // go-grpc-prometheus counts a unary response only when the call succeeded.
    expect(value('grpc_server_msg_sent_total', kvLabels('Put'))).toBe(3);
    expect(value('grpc_server_handled_total', { ...kvLabels('Range'), grpc_code: 'OK' })).toBe(1);
    expect(value('grpc_server_handling_seconds_count', kvLabels('Put'))).toBe(4);
    expect(value('grpc_server_handling_seconds_bucket', { ...kvLabels('Put'), le: '+Inf' })).toBe(4);
    expect(Number(/^etcd_network_client_grpc_received_bytes_total (\d+)/m.exec(text)?.[1])).toBeGreaterThan(4 * 3);
    expect(Number(/^etcd_network_client_grpc_sent_bytes_total (\d+)/m.exec(text)?.[1])).toBeGreaterThan(4 * 10);
  });

  it('counts stream messages and ends a stream the client cancels as Canceled', async () => {
    const labels = { grpc_method: 'Watch', grpc_service: 'etcdserverpb.Watch', grpc_type: 'bidi_stream' };
    const w = h.client('etcdserverpb.Watch') as unknown as { Watch(): grpc.ClientDuplexStream<unknown, unknown> };
    const stream = w.Watch();
    const got: unknown[] = [];
    stream.on('data', (d) => got.push(d));
    stream.on('error', () => undefined);
    stream.write({ createRequest: { key: Buffer.from('w') } });
    await waitFor(() => got.length >= 1, 5000, 'watch created');
    await call(h.client('etcdserverpb.KV'), 'Put', { key: Buffer.from('w'), value: Buffer.from('1') });
    await waitFor(() => got.length >= 2, 5000, 'watch event');
    await scrape();
    expect(value('grpc_server_started_total', labels)).toBe(1);
    expect(value('grpc_server_msg_received_total', labels)).toBe(1);
    expect(value('grpc_server_msg_sent_total', labels)).toBe(2);
    // A live stream is started but not handled: dashboards count active streams by the difference.
    expect(value('grpc_server_handled_total', { ...labels, grpc_code: 'OK' })).toBe(0);
    stream.cancel();
    const deadline = Date.now() + 5000;
    while (value('grpc_server_handled_total', { ...labels, grpc_code: 'Canceled' }) !== 1 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 10));
      await scrape();
    }
    expect(value('grpc_server_handled_total', { ...labels, grpc_code: 'Canceled' })).toBe(1);
    expect(value('grpc_server_handling_seconds_count', labels)).toBe(1);
  });

  it("does not count calls refused by etcd's own checks, as etcd's interceptor order does", async () => {
    const kv = h.client('etcdserverpb.KV');
    await scrape();
    const before = value('grpc_server_started_total', kvLabels('Put'));
    h.fake.isLearner = true;
    try {
      const deadline = Date.now() + 5000;
      for (;;) {
        const e = (await call(kv, 'Put', { key: Buffer.from('k'), value: Buffer.from('v') }).catch((x: unknown) => x)) as grpc.ServiceError | undefined;
        if (e?.code === grpc.status.UNAVAILABLE) break;
        expect(Date.now()).toBeLessThan(deadline);
        await new Promise((r) => setTimeout(r, 20));
      }
      await scrape();
      const afterRefusals = value('grpc_server_started_total', kvLabels('Put'))!;
      // Calls that passed before the learner state was seen were counted; the refusal was not.
      await call(kv, 'Put', { key: Buffer.from('k'), value: Buffer.from('v') }).catch(() => undefined);
      await scrape();
      expect(value('grpc_server_started_total', kvLabels('Put'))).toBe(afterRefusals);
      expect(value('grpc_server_handled_total', { ...kvLabels('Put'), grpc_code: 'Unavailable' })).toBe(0);
      expect(afterRefusals).toBeGreaterThanOrEqual(before!);
    } finally {
      h.fake.isLearner = false;
    }
  });

  it('creates Lock and Election series only once used, as etcd registers them late', async () => {
    await scrape();
    expect(text).not.toMatch(/grpc_service="v3lockpb\.Lock"/);
  });
});
