import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as grpc from '@grpc/grpc-js';
import { call, startHarness, type Harness } from './harness';

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ metrics: () => ({ contentType: 'text/plain; version=0.0.4', body: 'etcd_up 1\n' }) });
});
afterAll(async () => {
  await h.close();
});

async function get(path: string, method = 'GET'): Promise<{ status: number; body: string; type: string | null }> {
  const r = await fetch(`http://${h.endpoint}${path}`, { method });
  return { status: r.status, body: await r.text(), type: r.headers.get('content-type') };
}

describe('HTTP endpoints on the gRPC port', () => {
  it('serves /health like etcd', async () => {
    expect(await get('/health')).toEqual({ status: 200, body: '{"health":"true","reason":""}', type: 'text/plain; charset=utf-8' });
    await get('/health?exclude=NOSPACE&serializable=true');
    expect(h.fake.calls).toContain('health:true:NOSPACE');
    h.fake.healthy = false;
    try {
      const r = await get('/health');
      expect([r.status, r.body]).toEqual([503, '{"health":"false","reason":"RAFT NO LEADER"}\n']);
    } finally {
      h.fake.healthy = true;
    }
    const r405 = await get('/health', 'POST');
    expect([r405.status, r405.body]).toEqual([405, 'Method Not Allowed\n']);
  });

  it('serves /livez and /readyz, verbose and with exclusions', async () => {
    expect(await get('/livez')).toMatchObject({ status: 200, body: 'ok\n' });
    expect((await get('/livez?verbose')).body).toBe('[+]serializable_read ok\nok\n');
    expect((await get('/readyz?verbose')).body).toBe(
      '[+]data_corruption ok\n[+]serializable_read ok\n[+]linearizable_read ok\n[+]non_learner ok\nok\n',
    );
    expect((await get('/readyz?verbose&exclude=non_learner&exclude=linearizable_read')).body).toBe(
      '[+]data_corruption ok\n[+]serializable_read ok\nok\n',
    );
    expect((await get('/readyz/serializable_read?verbose')).body).toBe('[+]serializable_read ok\nok\n');

    h.fake.alarms = [{ memberID: '1', alarm: 2 }];
    h.fake.isLearner = true;
    try {
      const r = await get('/readyz');
      expect(r.status).toBe(503);
      expect(r.body).toBe(
        '[-]data_corruption failed: alarm activated: CORRUPT\n[+]serializable_read ok\n[+]linearizable_read ok\n[-]non_learner failed: not supported for learner\n\n',
      );
      expect((await get('/livez')).status).toBe(200);
    } finally {
      h.fake.alarms = [];
      h.fake.isLearner = false;
    }
  });

  it('serves /version, /metrics, and 404 for anything else', async () => {
    const v = await get('/version');
    expect(v).toEqual({ status: 200, body: '{"etcdserver":"3.6.0","etcdcluster":"3.6.0"}', type: 'application/json' });
    expect(await get('/metrics')).toEqual({ status: 200, body: 'etcd_up 1\n', type: 'text/plain; version=0.0.4' });
    expect(await get('/nope')).toEqual({ status: 404, body: '404 page not found\n', type: 'text/plain; charset=utf-8' });
  });

  it('adds etcd default CORS headers and answers preflights', async () => {
    const r = await fetch(`http://${h.endpoint}/version`);
    expect(r.headers.get('access-control-allow-origin')).toBe('*');
    expect(r.headers.get('access-control-allow-methods')).toBe('POST, GET, OPTIONS, PUT, DELETE');
    const pre = await get('/anything', 'OPTIONS');
    expect([pre.status, pre.body]).toEqual([200, '']);
  });

  it('answers the gRPC health check with SERVING, then NOT_SERVING', async () => {
    const health = h.client('grpc.health.v1.Health');
    expect(await call(health, 'Check', { service: '' })).toEqual({ status: 1 });
    h.setServing(false);
    expect(await call(health, 'Check', { service: '' })).toEqual({ status: 2 });
    h.setServing(true);
    const err = (await call(health, 'Check', { service: 'nope' }).catch((e: unknown) => e)) as grpc.ServiceError;
    expect(err.code).toBe(grpc.status.NOT_FOUND);
  });
});
