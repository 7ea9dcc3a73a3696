// The HTTP side users hit without an etcd client: health probes (Kubernetes), /version,
// /metrics (Prometheus) and the JSON gateway (curl).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EtcdMember, startEtcd } from '../helpers/etcd-process';

let m: EtcdMember;

beforeAll(async () => {
  m = await startEtcd();
});
afterAll(async () => {
  await m?.stop();
});

async function get(path: string): Promise<{ status: number; body: string }> {
  const res = await fetch(`${m.clientUrl}${path}`, { signal: AbortSignal.timeout(10_000) });
  return { status: res.status, body: await res.text() };
}
async function post(
  path: string,
  body: unknown,
  opts: { member?: EtcdMember; headers?: Record<string, string> } = {},
): Promise<{ status: number; json: Record<string, unknown> }> {
  const res = await fetch(`${(opts.member ?? m).clientUrl}${path}`, {
    method: 'POST',
    // A string is sent as written (a bare int64 literal cannot be written with JSON.stringify).
    body: typeof body === 'string' ? body : JSON.stringify(body),
    headers: { 'content-type': 'application/json', ...opts.headers },
    signal: AbortSignal.timeout(10_000),
  });
  return { status: res.status, json: (await res.json()) as Record<string, unknown> };
}
const b64 = (s: string): string => Buffer.from(s).toString('base64');

describe('http endpoints', () => {
  it('GET /health reports healthy', async () => {
    const r = await get('/health');
    expect(r.status).toBe(200);
    expect(JSON.parse(r.body)).toMatchObject({ health: 'true' });
  });

  it('GET /version reports server and cluster versions', async () => {
    const r = await get('/version');
    expect(r.status).toBe(200);
    const v = JSON.parse(r.body) as Record<string, string>;
    expect(v['etcdserver']).toMatch(/^3\.\d+\.\d+$/);
    expect(v['etcdcluster']).toMatch(/^3\.\d+\.0$/);
  });

  it('GET /metrics serves Prometheus text with etcd metric names', async () => {
    const r = await get('/metrics');
    expect(r.status).toBe(200);
    expect(r.body).toMatch(/^etcd_server_has_leader 1$/m);
    expect(r.body).toMatch(/^etcd_mvcc_db_total_size_in_bytes \d+/m);
  });

  it('the JSON gateway puts and ranges with base64 bytes and int64 strings', async () => {
    const put = await post('/v3/kv/put', { key: b64('gw/k'), value: b64('v') });
    expect(put.status).toBe(200);
    const header = put.json['header'] as Record<string, unknown>;
    expect(header['revision']).toMatch(/^\d+$/);
    expect(header['cluster_id']).toMatch(/^\d+$/);

    const range = await post('/v3/kv/range', { key: b64('gw/k') });
    expect(range.status).toBe(200);
    expect(range.json['count']).toBe('1');
    // Zero values (lease, more) are left out, as etcd's gateway does.
    expect(range.json['kvs']).toEqual([
      { key: b64('gw/k'), create_revision: header['revision'], mod_revision: header['revision'], version: '1', value: b64('v') },
    ]);
    expect(range.json).not.toHaveProperty('more');
  });

  it('the JSON gateway reports errors with the gRPC code and etcd text', async () => {
    const r = await post('/v3/kv/range', { key: b64('gw/k'), revision: 1_000_000 });
    expect(r.status).not.toBe(200);
    expect(r.json).toMatchObject({ code: 11, message: 'etcdserver: mvcc: required revision is a future revision' });
  });

  it('the JSON gateway reads an int64 written as a bare JSON number exactly (lease IDs)', async () => {
    // etcd's own e2e (TestV3CurlLease*) sends IDs this way; a double would make it ...792.
    const grant = await post('/v3/lease/grant', '{"TTL": 60, "ID": 7587862072907489794}');
    expect(grant.status).toBe(200);
    expect(grant.json['ID']).toBe('7587862072907489794');
    const ttl = await post('/v3/lease/timetolive', '{"ID": 7587862072907489794}');
    expect(ttl.json).toMatchObject({ ID: '7587862072907489794', grantedTTL: '60' });
    const revoke = await post('/v3/lease/revoke', '{"ID": 7587862072907489794}');
    expect(revoke.status).toBe(200);
  });
});

describe('the JSON gateway with auth enabled', () => {
  let a: EtcdMember;
  beforeAll(async () => {
    a = await startEtcd();
  });
  afterAll(async () => {
    await a?.stop();
  });

  it('passes the token from Authorization or Grpc-Metadata-Token, as grpc-gateway does', async () => {
    const on = { member: a };
    expect((await post('/v3/auth/user/add', { name: 'root', password: 'toor' }, on)).status).toBe(200);
    expect((await post('/v3/auth/user/grant', { user: 'root', role: 'root' }, on)).status).toBe(200);
    expect((await post('/v3/auth/enable', {}, on)).status).toBe(200);
    const auth = await post('/v3/auth/authenticate', { name: 'root', password: 'toor' }, on);
    const token = auth.json['token'];
    expect(typeof token).toBe('string');

    const put = { key: b64('gw/auth'), value: b64('v') };
    expect((await post('/v3/kv/put', put, on)).json).toMatchObject({ code: 3, error: 'etcdserver: user name is empty' });
    const withAuthorization = await post('/v3/kv/put', put, { member: a, headers: { authorization: String(token) } });
    expect(withAuthorization.status).toBe(200);
    const withMetadata = await post('/v3/kv/range', { key: b64('gw/auth') }, { member: a, headers: { 'grpc-metadata-token': String(token) } });
    expect(withMetadata.json['count']).toBe('1');
    const badToken = await post('/v3/kv/range', { key: b64('gw/auth') }, { member: a, headers: { authorization: 'nope.1' } });
    expect(badToken.json).toMatchObject({ error: 'etcdserver: invalid auth token' });
  });
});
