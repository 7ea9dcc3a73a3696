// Auth over raw gRPC (the caller's token in the `token` metadata): the answers etcd 3.4 gives where
// differential-auth-random.test.ts found ours different. Passes against the real etcd too:
//   ETCD_BIN=/usr/bin/etcd npx vitest run test/integration/auth-grpc.test.ts
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EtcdMember, startEtcd } from '../helpers/etcd-process';
import { EtcdGrpc, isRpcError, Msg, StreamReader } from '../helpers/grpc';

let m: EtcdMember;
let c: EtcdGrpc;
const tokens: Record<string, string> = {};

const B = (s: string): Buffer => Buffer.from(s);

async function admin(method: string, req: Msg): Promise<Msg> {
  return c.unary('Auth', method, req, 5_000, tokens['root'] ? { token: tokens['root'] } : undefined);
}

async function authenticate(name: string, password: string): Promise<string> {
  const res = await c.unary('Auth', 'Authenticate', { name, password });
  return String(res['token']);
}

/** The outcome of a unary call: its response or its gRPC code and message. */
async function outcome(p: Promise<Msg>): Promise<Msg | { code: number; details: string }> {
  try {
    return await p;
  } catch (e) {
    if (isRpcError(e)) return { code: e.code, details: e.details };
    throw e;
  }
}

/** The first response to a watch create sent on a fresh stream with `token` (if any). */
async function watchCreate(create: Msg, token?: string): Promise<Msg> {
  const stream = c.bidi('Watch', 'Watch', 10_000, token === undefined ? undefined : { token });
  const reader = new StreamReader(stream, 10);
  try {
    stream.write({ create_request: create });
    return await reader.next(5_000);
  } finally {
    stream.cancel();
  }
}

beforeAll(async () => {
  m = await startEtcd({ args: ['--bcrypt-cost=4'] });
  c = new EtcdGrpc(m.clientHostPort);
  await admin('UserAdd', { name: 'root', password: 'rootpw' });
  await admin('UserGrantRole', { user: 'root', role: 'root' });
  await admin('UserAdd', { name: 'alice', password: 'alicepw' });
  await admin('UserAdd', { name: 'nopw', password: '', options: { no_password: true } });
  await admin('RoleAdd', { name: 'r' });
  await admin('RoleGrantPermission', { name: 'r', perm: { permType: 0, key: B('a'), range_end: B('b') } });
  await admin('UserGrantRole', { user: 'alice', role: 'r' });
  await admin('AuthEnable', {});
  tokens['root'] = await authenticate('root', 'rootpw');
  tokens['alice'] = await authenticate('alice', 'alicepw');
});
afterAll(async () => {
  c?.close();
  await m?.stop();
});

describe('auth over gRPC, as etcd 3.4 answers', () => {
  it('refuses a watch create with watch ID -1 and the reason etcd names', async () => {
    const refused = (reason: string): Msg => expect.objectContaining({ watch_id: '-1', created: true, canceled: true, cancel_reason: reason }) as Msg;
    expect(await watchCreate({ key: B('x') })).toEqual(refused('rpc error: code = InvalidArgument desc = etcdserver: user name is empty'));
    expect(await watchCreate({ key: B('x') }, 'bogus')).toEqual(refused('rpc error: code = Unauthenticated desc = etcdserver: invalid auth token'));
    expect(await watchCreate({ key: B('x') }, tokens['alice'])).toEqual(refused('rpc error: code = PermissionDenied desc = etcdserver: permission denied'));
    expect(await watchCreate({ key: B('a/1') }, tokens['alice'])).toEqual(expect.objectContaining({ watch_id: '0', created: true, canceled: false }));
  });

  it('checks a watch create against its caller before its range', async () => {
    expect(await watchCreate({ key: B('b'), range_end: B('a') })).toEqual(
      expect.objectContaining({ watch_id: '-1', canceled: true, cancel_reason: 'rpc error: code = InvalidArgument desc = etcdserver: user name is empty' }),
    );
    expect(await watchCreate({ key: B('b'), range_end: B('a') }, tokens['root'])).toEqual(
      expect.objectContaining({ watch_id: '-1', canceled: true, cancel_reason: 'mvcc: watcher range is empty' }),
    );
  });

  it('refuses a token it cannot resolve on LeaseGrant and before looking at a UserAdd', async () => {
    const invalid = { code: 16, details: 'etcdserver: invalid auth token' };
    expect(await outcome(c.unary('Lease', 'LeaseGrant', { ID: '77', TTL: 60 }, 5_000, { token: 'bogus' }))).toEqual(invalid);
    expect(await outcome(c.unary('Auth', 'UserAdd', { name: '', password: 'x' }, 5_000, { token: 'bogus' }))).toEqual(invalid);
    expect(await outcome(c.unary('Auth', 'UserAdd', { name: '', password: 'x' }))).toEqual({ code: 3, details: 'etcdserver: user name is empty' });
  });

  it('refuses a token it cannot resolve sent with Authenticate or Alarm', async () => {
    expect(await outcome(c.unary('Auth', 'Authenticate', { name: 'alice', password: 'alicepw' }, 5_000, { token: 'bogus' }))).toEqual({
      code: 16,
      details: 'etcdserver: invalid auth token',
    });
    // The password is checked first.
    expect(await outcome(c.unary('Auth', 'Authenticate', { name: 'alice', password: 'nope' }, 5_000, { token: 'bogus' }))).toEqual({
      code: 3,
      details: 'etcdserver: authentication failed, invalid user ID or password',
    });
    // etcd 3.4 sends the auth store's error untranslated here ("auth: invalid auth token", Unknown); 3.5+ as below.
    const alarm = await outcome(c.unary('Maintenance', 'Alarm', { action: 0 }, 5_000, { token: 'bogus' }));
    expect(alarm).toEqual({ code: expect.any(Number), details: expect.stringMatching(/: invalid auth token$/) });
    if (!process.env['ETCD_BIN']) expect(alarm).toEqual({ code: 16, details: 'etcdserver: invalid auth token' });
  });

  it("shows a lease's keys only to a caller who may read them (CVE-2023-32082, fixed in etcd 3.4.26 and 3.5.9)", async () => {
    await c.unary('Lease', 'LeaseGrant', { ID: '500', TTL: 600 }, 5_000, { token: tokens['root']! });
    await c.unary('KV', 'Put', { key: B('secret'), value: B('v'), lease: '500' }, 5_000, { token: tokens['root']! });
    const asAlice = (keys: boolean): Promise<unknown> => outcome(c.unary('Lease', 'LeaseTimeToLive', { ID: '500', keys }, 5_000, { token: tokens['alice']! }));
    expect(await asAlice(false)).toEqual(expect.objectContaining({ ID: '500', keys: [] }));
    const withKeys = await asAlice(true);
    const anonymous = await outcome(c.unary('Lease', 'LeaseTimeToLive', { ID: '500', keys: true }));
    if (process.env['ETCD_BIN']) {
      // The reference, etcd 3.4.23, still has the leak.
      expect(withKeys).toEqual(expect.objectContaining({ keys: [B('secret')] }));
    } else {
      expect(withKeys).toEqual({ code: 7, details: 'etcdserver: permission denied' });
      expect(anonymous).toEqual({ code: 3, details: 'etcdserver: user name is empty' });
    }
    expect(await outcome(c.unary('Lease', 'LeaseTimeToLive', { ID: '500', keys: true }, 5_000, { token: tokens['root']! }))).toEqual(
      expect.objectContaining({ keys: [B('secret')] }),
    );
  });

  it('grants a permission a second time when an earlier one has its key but not its range end', async () => {
    await admin('RoleAdd', { name: 'dup' });
    for (const [permType, range_end] of [
      [0, B('')],
      [0, B('b')],
      [1, B('b')],
    ] as const) {
      await admin('RoleGrantPermission', { name: 'dup', perm: { permType, key: B('a'), range_end } });
    }
    const res = await admin('RoleGet', { role: 'dup' });
    expect((res['perm'] as Msg[]).map((p) => [p['permType'], String(p['key']), String(p['range_end'])])).toEqual([
      ['Read', 'a', ''],
      ['Read', 'a', 'b'],
      ['Write', 'a', 'b'],
    ]);
  });

  it('answers a password for a no-password user with etcd auth package error, as Unknown', async () => {
    expect(await outcome(c.unary('Auth', 'Authenticate', { name: 'nopw', password: 'x' }))).toEqual({
      code: 2,
      details: 'auth: authentication failed, password was given for no password user',
    });
    expect(await outcome(c.unary('Auth', 'Authenticate', { name: 'nobody', password: 'x' }))).toEqual({
      code: 3,
      details: 'etcdserver: authentication failed, invalid user ID or password',
    });
  });

  // Last: it turns auth off.
  it('with auth off, still refuses a read with a token it cannot resolve', async () => {
    const root = tokens['root']!;
    await admin('AuthDisable', {});
    delete tokens['root'];
    const invalid = { code: 16, details: 'etcdserver: invalid auth token' };
    expect(await outcome(c.unary('KV', 'Range', { key: B('a') }, 5_000, { token: 'bogus' }))).toEqual(invalid);
    // Disabling auth drops every token.
    expect(await outcome(c.unary('KV', 'Range', { key: B('a') }, 5_000, { token: root }))).toEqual(invalid);
    expect(await outcome(c.unary('KV', 'Range', { key: B('a') }))).toEqual(expect.objectContaining({ count: '0' }));
    // An admin-only request resolves the token first too (3.4: untranslated, see above).
    const hash = await outcome(c.unary('Maintenance', 'Hash', {}, 5_000, { token: 'bogus' }));
    expect(hash).toEqual({ code: expect.any(Number), details: expect.stringMatching(/: invalid auth token$/) });
    if (!process.env['ETCD_BIN']) expect(hash).toEqual(invalid);
  });
});
