// Auth over raw gRPC (the caller's token in the `token` metadata): the answers etcd 3.6 gives where
// the differential auth tests found ours different, checked one by one against ours and the real
// etcd 3.6 (scripts/reference/install.sh's build) in the same run. ETCD_BIN picks another server
// under test in place of ours (e.g. the 3.7 build).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EtcdMember, etcdBin, startEtcd } from '../helpers/etcd-process';
import { EtcdGrpc, isRpcError, Msg, StreamReader } from '../helpers/grpc';
import { referenceEtcd } from '../helpers/reference';

const B = (s: string): Buffer => Buffer.from(s);

const SERVERS: Array<[string, string]> = [
  ['the server under test', etcdBin()],
  ['etcd 3.6', referenceEtcd('3.6').etcd],
];

type Outcome = Msg | { code: number; details: string };

const EMPTY = { code: 3, details: 'etcdserver: user name is empty' };
const INVALID = { code: 16, details: 'etcdserver: invalid auth token' };
const DENIED = { code: 7, details: 'etcdserver: permission denied' };

describe.each(SERVERS)('auth over gRPC, as etcd 3.6 answers: %s', (_name, bin) => {
  let m: EtcdMember;
  let c: EtcdGrpc;
  const tokens: Record<string, string> = {};

  /** The caller's metadata: a user's token, a literal bogus token, or nobody. */
  const as = (who?: string): Record<string, string> | undefined => (who === undefined ? undefined : { token: tokens[who] ?? who });

  /** The outcome of a unary call: its response (without the header) or its gRPC code and message. */
  async function call(service: 'KV' | 'Lease' | 'Auth' | 'Maintenance' | 'Cluster', method: string, req: Msg, who?: string): Promise<Outcome> {
    try {
      const { header: _header, ...rest } = await c.unary(service, method, req, 5_000, as(who));
      return rest;
    } catch (e) {
      if (isRpcError(e)) return { code: e.code, details: e.details };
      throw e;
    }
  }

  const admin = (method: string, req: Msg): Promise<Outcome> => call('Auth', method, req, tokens['root'] ? 'root' : undefined);

  async function authenticate(name: string, password: string): Promise<string> {
    const res = await c.unary('Auth', 'Authenticate', { name, password });
    return String(res['token']);
  }

  /** The first response to a watch create sent on a fresh stream as `who`. */
  async function watchCreate(create: Msg, who?: string): Promise<Msg> {
    const stream = c.bidi('Watch', 'Watch', 10_000, as(who));
    const reader = new StreamReader(stream, 10);
    try {
      stream.write({ create_request: create });
      return await reader.next(5_000);
    } finally {
      stream.cancel();
    }
  }

  /** One keepalive on a fresh stream as `who`: the answer, or the status the stream ended with. */
  async function keepAlive(id: string, who?: string): Promise<Outcome> {
    const stream = c.bidi('Lease', 'LeaseKeepAlive', 10_000, as(who));
    const reader = new StreamReader(stream, 10);
    try {
      stream.write({ ID: id });
      const { header: _header, ...rest } = await reader.next(5_000);
      return rest;
    } catch (e) {
      if (isRpcError(e)) return { code: e.code, details: e.details };
      throw e;
    } finally {
      stream.cancel();
    }
  }

  beforeAll(async () => {
    m = await startEtcd({ bin, args: ['--bcrypt-cost=4'] });
    c = new EtcdGrpc(m.clientHostPort);
    await admin('UserAdd', { name: 'root', password: 'rootpw' });
    await admin('UserGrantRole', { user: 'root', role: 'root' });
    await admin('UserAdd', { name: 'alice', password: 'alicepw' });
    await admin('UserAdd', { name: 'writer', password: 'writerpw' });
    await admin('UserAdd', { name: 'nobody', password: 'nobodypw' });
    await admin('UserAdd', { name: 'nopw', password: '', options: { no_password: true } });
    await admin('RoleAdd', { name: 'r' });
    await admin('RoleGrantPermission', { name: 'r', perm: { permType: 0, key: B('a'), range_end: B('b') } });
    await admin('UserGrantRole', { user: 'alice', role: 'r' });
    await admin('RoleAdd', { name: 'w' });
    await admin('RoleGrantPermission', { name: 'w', perm: { permType: 1, key: B('a'), range_end: B('b') } });
    await admin('UserGrantRole', { user: 'writer', role: 'w' });
    await admin('AuthEnable', {});
    tokens['root'] = await authenticate('root', 'rootpw');
    tokens['alice'] = await authenticate('alice', 'alicepw');
    tokens['writer'] = await authenticate('writer', 'writerpw');
    tokens['nobody'] = await authenticate('nobody', 'nobodypw');
  });
  afterAll(async () => {
    c?.close();
    await m?.stop();
  });

  it('refuses a watch create with watch ID -1 and the reason etcd names', async () => {
    const refused = (reason: string): Msg => expect.objectContaining({ watch_id: '-1', created: true, canceled: true, cancel_reason: reason }) as Msg;
    expect(await watchCreate({ key: B('x') })).toEqual(refused('rpc error: code = InvalidArgument desc = etcdserver: user name is empty'));
    expect(await watchCreate({ key: B('x') }, 'bogus')).toEqual(refused('rpc error: code = Unauthenticated desc = etcdserver: invalid auth token'));
    expect(await watchCreate({ key: B('x') }, 'alice')).toEqual(refused('rpc error: code = PermissionDenied desc = etcdserver: permission denied'));
    expect(await watchCreate({ key: B('a/1') }, 'alice')).toEqual(expect.objectContaining({ watch_id: '0', created: true, canceled: false }));
  });

  it('checks a watch from a key on over the whole range (3.4 checked its first key only)', async () => {
    expect(await watchCreate({ key: B('a/1'), range_end: B('\0') }, 'alice')).toEqual(
      expect.objectContaining({ watch_id: '-1', canceled: true, cancel_reason: 'rpc error: code = PermissionDenied desc = etcdserver: permission denied' }),
    );
  });

  it('checks a watch create against its caller before its range', async () => {
    expect(await watchCreate({ key: B('b'), range_end: B('a') })).toEqual(
      expect.objectContaining({ watch_id: '-1', canceled: true, cancel_reason: 'rpc error: code = InvalidArgument desc = etcdserver: user name is empty' }),
    );
    expect(await watchCreate({ key: B('b'), range_end: B('a') }, 'root')).toEqual(
      expect.objectContaining({ watch_id: '-1', canceled: true, cancel_reason: 'mvcc: watcher range is empty' }),
    );
  });

  it('refuses a token it cannot resolve on LeaseGrant and before looking at a UserAdd', async () => {
    expect(await call('Lease', 'LeaseGrant', { ID: '77', TTL: 60 }, 'bogus')).toEqual(INVALID);
    expect(await call('Auth', 'UserAdd', { name: '', password: 'x' }, 'bogus')).toEqual(INVALID);
    expect(await call('Auth', 'UserAdd', { name: '', password: 'x' })).toEqual(EMPTY);
  });

  it('takes "Bearer <token>" as the token', async () => {
    expect(await call('KV', 'Range', { key: B('a/1') }, `Bearer ${tokens['alice']!}`)).toEqual({ kvs: [], more: false, count: '0' });
    expect(await call('KV', 'Range', { key: B('a/1') }, `bearer ${tokens['alice']!}`)).toEqual(INVALID);
  });

  it('answers Authenticate whatever token comes with it (3.4 refused one it could not resolve)', async () => {
    expect(await call('Auth', 'Authenticate', { name: 'alice', password: 'alicepw' }, 'bogus')).toEqual({ token: expect.any(String) });
    expect(await call('Auth', 'Authenticate', { name: 'alice', password: 'nope' }, 'bogus')).toEqual({
      code: 3,
      details: 'etcdserver: authentication failed, invalid user ID or password',
    });
  });

  it('asks any user, but a user, for Status, the alarm list and the member list; only root may change alarms', async () => {
    for (const [service, method, req] of [
      ['Maintenance', 'Status', {}],
      ['Maintenance', 'Alarm', { action: 0 }],
      ['Cluster', 'MemberList', {}],
    ] as const) {
      expect(await call(service, method, req)).toEqual(EMPTY);
      expect(await call(service, method, req, 'bogus')).toEqual(INVALID);
      expect(await call(service, method, req, 'nobody')).not.toHaveProperty('code');
    }
    expect(await call('Maintenance', 'Alarm', { action: 0 }, 'nobody')).toEqual({ alarms: [] });
    // Deactivating an alarm that is not raised: root may, nobody else.
    expect(await call('Maintenance', 'Alarm', { action: 2, alarm: 1, memberID: '0' }, 'nobody')).toEqual(DENIED);
    expect(await call('Maintenance', 'Alarm', { action: 2, alarm: 1, memberID: '0' })).toEqual(EMPTY);
    expect(await call('Maintenance', 'Alarm', { action: 2, alarm: 1, memberID: '0' }, 'root')).toEqual({ alarms: [] });
  });

  describe('leases (etcd 3.6 checks every lease call; 3.4 answered anyone)', () => {
    beforeAll(async () => {
      await call('Lease', 'LeaseGrant', { ID: '500', TTL: 600 }, 'root');
      await call('KV', 'Put', { key: B('a/1'), value: B('v'), lease: '500' }, 'root');
      await call('Lease', 'LeaseGrant', { ID: '501', TTL: 600 }, 'root');
      await call('KV', 'Put', { key: B('secret'), value: B('v'), lease: '501' }, 'root');
    });

    it('refuses nobody every lease call, and a token it cannot resolve', async () => {
      for (const who of [undefined, 'bogus']) {
        const want = who === undefined ? EMPTY : INVALID;
        expect(await call('Lease', 'LeaseGrant', { ID: '600', TTL: 60 }, who)).toEqual(want);
        expect(await call('Lease', 'LeaseGrant', { TTL: 60 }, who)).toEqual(want);
        expect(await call('Lease', 'LeaseTimeToLive', { ID: '500' }, who)).toEqual(want);
        expect(await call('Lease', 'LeaseTimeToLive', { ID: '500', keys: true }, who)).toEqual(want);
        expect(await call('Lease', 'LeaseTimeToLive', { ID: '999' }, who)).toEqual(want);
        expect(await call('Lease', 'LeaseLeases', {}, who)).toEqual(want);
        expect(await call('Lease', 'LeaseRevoke', { ID: '500' }, who)).toEqual(want);
        expect(await keepAlive('500', who)).toEqual(want);
        expect(await keepAlive('999', who)).toEqual(want);
      }
    });

    it("answers a user's time-to-live without keys; the keys (CVE-2023-32082) and the list only to who may read every key", async () => {
      const ttl = (id: string, keys: Buffer[]): Msg => ({ ID: id, TTL: expect.stringMatching(/^(59\d|600)$/), grantedTTL: '600', keys });
      expect(await call('Lease', 'LeaseTimeToLive', { ID: '500' }, 'nobody')).toEqual(ttl('500', []));
      expect(await call('Lease', 'LeaseTimeToLive', { ID: '500', keys: true }, 'nobody')).toEqual(DENIED);
      expect(await call('Lease', 'LeaseTimeToLive', { ID: '500', keys: true }, 'alice')).toEqual(ttl('500', [B('a/1')]));
      expect(await call('Lease', 'LeaseTimeToLive', { ID: '500', keys: true }, 'writer')).toEqual(DENIED);
      expect(await call('Lease', 'LeaseTimeToLive', { ID: '501', keys: true }, 'alice')).toEqual(DENIED);
      expect(await call('Lease', 'LeaseTimeToLive', { ID: '501', keys: true }, 'root')).toEqual(ttl('501', [B('secret')]));
      expect(await call('Lease', 'LeaseTimeToLive', { ID: '999', keys: true }, 'nobody')).toEqual({ ID: '999', TTL: '-1', grantedTTL: '0', keys: [] });
      // Lease 501's key is out of alice's reach: no list for her, nor for anyone but root.
      expect(await call('Lease', 'LeaseLeases', {}, 'alice')).toEqual(DENIED);
      expect(await call('Lease', 'LeaseLeases', {}, 'nobody')).toEqual(DENIED);
      expect(await call('Lease', 'LeaseLeases', {}, 'root')).toEqual({ leases: expect.arrayContaining([{ ID: '500' }, { ID: '501' }]) });
    });

    it('renews, revokes and attaches keys only for who may write every key of the lease', async () => {
      expect(await keepAlive('500', 'nobody')).toEqual(DENIED);
      expect(await keepAlive('500', 'alice')).toEqual(DENIED);
      expect(await keepAlive('500', 'writer')).toEqual({ ID: '500', TTL: '600' });
      expect(await keepAlive('501', 'writer')).toEqual(DENIED);
      expect(await keepAlive('999', 'nobody')).toEqual({ ID: '999', TTL: '0' });
      expect(await call('Lease', 'LeaseGrant', { ID: '602', TTL: 600 }, 'nobody')).toEqual({ ID: '602', TTL: '600', error: '' });
      expect(await keepAlive('602', 'nobody')).toEqual({ ID: '602', TTL: '600' });
      // A put or a txn's put attaching a key to lease 501 needs write permission on 'secret'.
      expect(await call('KV', 'Put', { key: B('a/3'), value: B('v'), lease: '501' }, 'writer')).toEqual(DENIED);
      expect(await call('KV', 'Txn', { success: [{ request_put: { key: B('a/3'), value: B('v'), lease: '501' } }] }, 'writer')).toEqual(DENIED);
      // A txn's put with prev_kv needs read permission, as a plain Put does.
      expect(await call('KV', 'Txn', { success: [{ request_put: { key: B('a/3'), value: B('v'), prev_kv: true } }] }, 'writer')).toEqual(DENIED);
      expect(await call('KV', 'Put', { key: B('a/2'), value: B('v'), lease: '500' }, 'writer')).toEqual({ prev_kv: null });
      expect(await call('Lease', 'LeaseRevoke', { ID: '500' }, 'nobody')).toEqual(DENIED);
      expect(await call('Lease', 'LeaseRevoke', { ID: '500' }, 'alice')).toEqual(DENIED);
      expect(await call('Lease', 'LeaseRevoke', { ID: '999' }, 'nobody')).toEqual({ code: 5, details: 'etcdserver: requested lease not found' });
      expect(await call('Lease', 'LeaseRevoke', { ID: '602' }, 'nobody')).toEqual({});
      expect(await call('Lease', 'LeaseRevoke', { ID: '500' }, 'writer')).toEqual({});
      expect(await call('Lease', 'LeaseRevoke', { ID: '501' }, 'root')).toEqual({});
      // Nothing left that alice may not read.
      expect(await call('Lease', 'LeaseLeases', {}, 'alice')).toEqual({ leases: [] });
    });
  });

  it('shows the root role as one permission over every key, whatever was granted to it', async () => {
    // Granting the root role needs no role of that name; asking for it does.
    expect(await admin('RoleGet', { role: 'root' })).toEqual({ code: 9, details: 'etcdserver: role name not found' });
    await admin('RoleAdd', { name: 'root' });
    await admin('RoleGrantPermission', { name: 'root', perm: { permType: 0, key: B('x') } });
    expect(await admin('RoleGet', { role: 'root' })).toEqual({ perm: [{ permType: 'Readwrite', key: B(''), range_end: B('\0') }] });
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
    const res = (await admin('RoleGet', { role: 'dup' })) as Msg;
    expect((res['perm'] as Msg[]).map((p) => [p['permType'], String(p['key']), String(p['range_end'])])).toEqual([
      ['Read', 'a', ''],
      ['Read', 'a', 'b'],
      ['Write', 'a', 'b'],
    ]);
  });

  it('answers a password for a no-password user with etcd auth package error, as Unknown', async () => {
    expect(await call('Auth', 'Authenticate', { name: 'nopw', password: 'x' })).toEqual({
      code: 2,
      details: 'auth: authentication failed, password was given for no password user',
    });
    expect(await call('Auth', 'Authenticate', { name: 'nobody-at-all', password: 'x' })).toEqual({
      code: 3,
      details: 'etcdserver: authentication failed, invalid user ID or password',
    });
  });

  it('stores an empty new password as no password at all: no password matches it, "" included', async () => {
    await admin('UserAdd', { name: 'empty', password: '' });
    expect(await call('Auth', 'Authenticate', { name: 'empty', password: '' })).toEqual({ token: expect.any(String) });
    await admin('UserChangePassword', { name: 'empty', password: '' });
    const failed = { code: 3, details: 'etcdserver: authentication failed, invalid user ID or password' };
    expect(await call('Auth', 'Authenticate', { name: 'empty', password: '' })).toEqual(failed);
    expect(await call('Auth', 'Authenticate', { name: 'empty', password: 'x' })).toEqual(failed);
  });

  // Last: it turns auth off.
  it('with auth off, does not look at a token (3.4 refused one it could not resolve)', async () => {
    const root = tokens['root']!;
    await admin('AuthDisable', {});
    delete tokens['root'];
    expect(await call('KV', 'Range', { key: B('a/1') }, 'bogus')).toEqual({ kvs: [], more: false, count: '0' });
    // Disabling auth drops every token: an old one is just as ignored.
    expect(await call('KV', 'Range', { key: B('a/1') }, root)).toEqual({ kvs: [], more: false, count: '0' });
    expect(await call('Maintenance', 'Hash', {}, 'bogus')).toEqual({ hash: expect.any(Number) });
    expect(await call('Lease', 'LeaseGrant', { ID: '700', TTL: 60 }, 'bogus')).toEqual({ ID: '700', TTL: '60', error: '' });
    expect(await call('Auth', 'UserAdd', { name: '', password: 'x' }, 'bogus')).toEqual(EMPTY);
    expect(await call('Auth', 'Authenticate', { name: 'alice', password: 'alicepw' }, 'bogus')).toEqual({
      code: 9,
      details: 'etcdserver: authentication is not enabled',
    });
  });
});
