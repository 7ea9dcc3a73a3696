import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHarness, waitFor, type Harness } from './harness';

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(async () => {
  await h.close();
});

const b64 = (s: string): string => Buffer.from(s).toString('base64');

async function post(path: string, body: unknown): Promise<{ status: number; json: unknown }> {
  const r = await fetch(`http://${h.endpoint}${path}`, { method: 'POST', body: JSON.stringify(body) });
  return { status: r.status, json: await r.json() };
}

describe('JSON gRPC gateway (/v3/...)', () => {
  it('puts and ranges with proto field names, string int64s and base64 bytes', async () => {
    const put = await post('/v3/kv/put', { key: b64('foo'), value: b64('bar') });
    expect(put.status).toBe(200);
    expect(put.json).toEqual({
      header: { cluster_id: '14841639068965178418', member_id: '10276657743932975437', revision: '2', raft_term: '7' },
    });
    const range = await post('/v3/kv/range', { key: b64('foo') });
    expect(range.json).toEqual({
      header: { cluster_id: '14841639068965178418', member_id: '10276657743932975437', revision: '2', raft_term: '7' },
      kvs: [{ key: b64('foo'), create_revision: '2', mod_revision: '2', version: '1', value: b64('bar') }],
      count: '1',
    });
    // lowerCamel JSON names are accepted too, and the old /v3beta/ prefix.
    const r2 = await post('/v3beta/kv/range', { key: b64('a'), rangeEnd: b64('z'), countOnly: true });
    expect(r2.json).toMatchObject({ count: '1' });
  });

  it('answers gRPC errors as grpc-gateway v1 does', async () => {
    const r = await post('/v3/kv/range', { key: '' });
    expect(r).toEqual({ status: 400, json: { error: 'etcdserver: key is not provided', message: 'etcdserver: key is not provided', code: 3 } });
    const revoke = await post('/v3/lease/revoke', { ID: '99' });
    expect(revoke.status).toBe(404);
  });

  it('streams watch responses as {"result": ...} lines', async () => {
    const ac = new AbortController();
    const resp = await fetch(`http://${h.endpoint}/v3/watch`, {
      method: 'POST',
      body: JSON.stringify({ create_request: { key: b64('wk') } }),
      signal: ac.signal,
    });
    const reader = resp.body!.getReader();
    let text = '';
    const pump = (async () => {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return;
        text += Buffer.from(value).toString();
      }
    })().catch(() => undefined);
    await waitFor(() => text.includes('"created":true'), 5000, 'created line');
    await post('/v3/kv/put', { key: b64('wk'), value: b64('v1') });
    await waitFor(() => text.split('\n').filter(Boolean).length >= 2, 5000, 'event line');
    const lines = text.split('\n').filter(Boolean).map((l) => JSON.parse(l) as { result: Record<string, unknown> });
    expect(lines[0]!.result).toMatchObject({ created: true });
    expect(lines[1]!.result).toMatchObject({ events: [{ kv: { key: b64('wk'), value: b64('v1') } }] });
    ac.abort();
    await pump;
  });

  it('answers unknown /v3/ paths with 404 and other methods with 405', async () => {
    const nf = await fetch(`http://${h.endpoint}/v3/nope`, { method: 'POST', body: '{}' });
    expect([nf.status, await nf.text()]).toEqual([404, 'Not Found\n']);
    const r = await fetch(`http://${h.endpoint}/v3/kv/range`);
    expect([r.status, await r.text()]).toEqual([405, 'Method Not Allowed\n']);
  });
});
