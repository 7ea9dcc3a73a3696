// Auth through the real etcdctl (3.4): users, roles, permissions, enable/disable, and what a
// user with too few rights reads. Run against the real etcd with ETCD_BIN=/usr/bin/etcd.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BackgroundEtcdctl, etcdctl, RunResult } from '../helpers/etcdctl';
import { EtcdMember, startEtcd } from '../helpers/etcd-process';
import { waitFor } from '../helpers/wait';

let m: EtcdMember;
const background: BackgroundEtcdctl[] = [];

beforeAll(async () => {
  m = await startEtcd();
});
afterAll(async () => {
  for (const b of background) b.stop();
  await m?.stop();
});

function run(args: string[]): Promise<RunResult> {
  return etcdctl(args, { endpoint: m.clientHostPort });
}
async function ok(args: string[]): Promise<string> {
  const r = await run(args);
  if (r.code !== 0) throw new Error(`etcdctl ${args.join(' ')} exited ${r.code}: ${r.stderr}\n${m.logs().slice(-3000)}`);
  return r.stdout;
}
/** Run, expect a non-zero exit, return stderr's `Error: ...` line. */
async function fails(args: string[]): Promise<string> {
  const r = await run(args);
  expect(r.code, `etcdctl ${args.join(' ')} should fail; stdout ${r.stdout}`).not.toBe(0);
  return r.stderr.split('\n').find((l) => l.startsWith('Error:')) ?? r.stderr;
}
const ROOT = ['--user', 'root:rootpw'];
const ALICE = ['--user', 'alice:alicepw'];

describe('auth', () => {
  it('manages users while auth is disabled', async () => {
    expect(await ok(['user', 'add', 'root:rootpw'])).toBe('User root created\n');
    expect(await ok(['user', 'add', 'alice:alicepw'])).toBe('User alice created\n');
    expect(await ok(['user', 'add', 'bob:bobpw'])).toBe('User bob created\n');
    expect(await fails(['user', 'add', 'bob:other'])).toBe('Error: etcdserver: user name already exists');
    expect(await ok(['user', 'list'])).toBe('alice\nbob\nroot\n');
    expect(await ok(['user', 'delete', 'bob'])).toBe('User bob deleted\n');
    expect(await fails(['user', 'delete', 'bob'])).toBe('Error: etcdserver: user name not found');
    expect(await fails(['user', 'get', 'nobody'])).toBe('Error: etcdserver: user name not found');
  });

  it('manages roles and their permissions', async () => {
    expect(await ok(['role', 'add', 'rw-foo'])).toBe('Role rw-foo created\n');
    expect(await fails(['role', 'add', 'rw-foo'])).toBe('Error: etcdserver: role name already exists');
    expect(await ok(['role', 'grant-permission', 'rw-foo', 'readwrite', 'foo'])).toBe('Role rw-foo updated\n');
    expect(await ok(['role', 'grant-permission', '--prefix', 'rw-foo', 'read', 'pre/'])).toBe('Role rw-foo updated\n');
    expect(await ok(['role', 'grant-permission', '--from-key', 'rw-foo', 'write', 'zz'])).toBe('Role rw-foo updated\n');
    expect(await ok(['role', 'get', 'rw-foo'])).toBe(
      'Role rw-foo\nKV Read:\n\tfoo\n\t[pre/, pre0) (prefix pre/)\nKV Write:\n\tfoo\n\t[zz, <open ended>\n',
    );
    expect(await ok(['role', 'add', 'tmp'])).toBe('Role tmp created\n');
    expect(await ok(['role', 'list'])).toBe('rw-foo\ntmp\n');
    expect(await ok(['role', 'delete', 'tmp'])).toBe('Role tmp deleted\n');
    expect(await fails(['role', 'get', 'tmp'])).toBe('Error: etcdserver: role name not found');
    expect(await ok(['role', 'revoke-permission', '--from-key', 'rw-foo', 'zz'])).toBe('Permission of range [zz, <open ended> is revoked from role rw-foo\n');
    expect(await fails(['role', 'revoke-permission', 'rw-foo', 'nothere'])).toBe('Error: etcdserver: permission is not granted to the role');
  });

  it('grants and revokes roles to users', async () => {
    expect(await ok(['user', 'grant-role', 'alice', 'rw-foo'])).toBe('Role rw-foo is granted to user alice\n');
    expect(await fails(['user', 'grant-role', 'alice', 'missing'])).toBe('Error: etcdserver: role name not found');
    expect(await ok(['user', 'get', 'alice'])).toBe('User: alice\nRoles: rw-foo\n');
    expect(await fails(['user', 'revoke-role', 'root', 'rw-foo'])).toBe('Error: etcdserver: role is not granted to the user');
  });

  it('enables auth (etcdctl adds the root role to root when it is missing)', async () => {
    expect(await ok(['auth', 'enable'])).toBe('Authentication Enabled\n');
    expect(await ok([...ROOT, 'user', 'get', 'root'])).toBe('User: root\nRoles: root\n');
    expect(await ok([...ROOT, 'role', 'list'])).toBe('root\nrw-foo\n');
  });

  it('checks every request against the caller', async () => {
    expect(await fails(['put', 'foo', 'v'])).toBe('Error: etcdserver: user name is empty');
    expect(await fails(['--user', 'alice:wrong', 'get', 'foo'])).toBe('Error: etcdserver: authentication failed, invalid user ID or password');
    expect(await ok([...ALICE, 'put', 'foo', 'v1'])).toBe('OK\n');
    expect(await ok([...ALICE, 'get', 'foo'])).toBe('foo\nv1\n');
    expect(await fails([...ALICE, 'put', 'bar', 'v'])).toBe('Error: etcdserver: permission denied');
    expect(await fails([...ALICE, 'put', 'pre/a', 'v'])).toBe('Error: etcdserver: permission denied');
    expect(await ok([...ROOT, 'put', 'pre/a', 'va'])).toBe('OK\n');
    expect(await ok([...ALICE, 'get', '--prefix', 'pre/'])).toBe('pre/a\nva\n');
    expect(await fails([...ALICE, 'get', '--prefix', 'pr'])).toBe('Error: etcdserver: permission denied');
    expect(await fails([...ALICE, 'user', 'list'])).toBe('Error: etcdserver: permission denied');
    expect(await ok([...ALICE, 'user', 'get', 'alice'])).toBe('User: alice\nRoles: rw-foo\n');
    expect(await ok([...ALICE, 'role', 'get', 'rw-foo'])).toContain('Role rw-foo');
    expect(await ok([...ROOT, 'user', 'list'])).toBe('alice\nroot\n');
    expect(await fails([...ROOT, 'user', 'delete', 'root'])).toBe('Error: etcdserver: invalid auth management');
    expect(await fails([...ROOT, 'role', 'delete', 'root'])).toBe('Error: etcdserver: invalid auth management');
  });

  it('runs txns only with permission on every compare and op', async () => {
    const txn = 'value("foo") = "v1"\n\nput foo v2\n\nput bar x\n\n';
    const r = await etcdctl([...ALICE, 'txn'], { endpoint: m.clientHostPort, input: txn });
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('etcdserver: permission denied');
    const r2 = await etcdctl([...ALICE, 'txn'], { endpoint: m.clientHostPort, input: 'value("foo") = "v1"\n\nput foo v2\n\n\n' });
    expect(r2.stdout).toBe('SUCCESS\n\nOK\n');
  });

  it('cancels a watch on a range the user may not read', async () => {
    const w = new BackgroundEtcdctl([...ALICE, 'watch', 'bar'], { endpoint: m.clientHostPort });
    background.push(w);
    await waitFor('watch to be refused', () => (w.stderr() + w.stdout()).includes('permission denied'), { timeoutMs: 10_000 });
    expect(w.stderr() + w.stdout()).toContain('etcdserver: permission denied');
  });

  it('runs lock and election as the caller, checked like its KV requests', async () => {
    // etcd's v3lock/v3election call KV with the request's own context: no credentials, no lock.
    expect(await fails(['lock', 'mylock', '--', 'echo', 'held'])).toBe('Error: etcdserver: user name is empty');
    expect(await ok([...ROOT, 'lock', 'mylock', '--', 'echo', 'held'])).toBe('held\n');
    // Alice may read pre/ but not write it: the lock's queue key is a write.
    expect(await fails([...ALICE, 'lock', 'pre/l', '--', 'echo', 'held'])).toBe('Error: etcdserver: permission denied');
    expect(await fails(['elect', 'myelection', 'v'])).toBe('Error: etcdserver: user name is empty');
    expect(await fails([...ALICE, 'elect', 'pre/e', 'v'])).toBe('Error: etcdserver: permission denied');
  });

  it('changes passwords, forgets deleted users and disables auth as root', async () => {
    const r = await etcdctl([...ROOT, 'user', 'passwd', 'alice', '--interactive=false'], { endpoint: m.clientHostPort, input: 'newpw\n' });
    expect(r.stdout).toBe('Password updated\n');
    expect(await fails([...ALICE, 'get', 'foo'])).toBe('Error: etcdserver: authentication failed, invalid user ID or password');
    expect(await ok(['--user', 'alice:newpw', 'get', 'foo'])).toBe('foo\nv2\n');
    expect(await ok([...ROOT, 'user', 'delete', 'alice'])).toBe('User alice deleted\n');
    expect(await fails(['--user', 'alice:newpw', 'get', 'foo'])).toBe('Error: etcdserver: authentication failed, invalid user ID or password');
    expect(await ok([...ROOT, 'auth', 'enable'])).toBe('Authentication Enabled\n');
    expect(await ok([...ROOT, 'auth', 'disable'])).toBe('Authentication Disabled\n');
    expect(await ok(['put', 'foo', 'free'])).toBe('OK\n');
    expect(await ok(['user', 'list'])).toBe('root\n');
  });
});
