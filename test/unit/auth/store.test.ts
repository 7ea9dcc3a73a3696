import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Backend } from '../../../src/backend/backend';
import { AuthStore, PermType, type AuthInfo } from '../../../src/auth/store';
import type * as pb from '../../../src/pb/types';

let dir: string;
let be: Backend;
let st: AuthStore;

beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'auth-store-'));
  be = Backend.open(path.join(dir, 'db'));
  st = new AuthStore(be.subDb('auth'));
});
afterEach(async () => {
  await be.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

const b = (s: string): Buffer => Buffer.from(s);
const none = Buffer.alloc(0);
function tx<T>(fn: () => T): T {
  return be.batch(fn);
}
function errOf(fn: () => unknown): string {
  try {
    tx(fn);
  } catch (e) {
    return (e as Error).message;
  }
  return 'no error';
}
const addUser = (name: string): void => tx(() => st.userAdd({ name, password: '', hashedPassword: 'h', options: null }));
const grant = (role: string, permType: number, key: string, rangeEnd: string | Buffer): void =>
  tx(() => st.roleGrantPermission({ name: role, perm: { permType, key: b(key), rangeEnd: typeof rangeEnd === 'string' ? b(rangeEnd) : rangeEnd } }));

function setupEnabled(): AuthInfo {
  addUser('root');
  tx(() => st.userGrantRole({ user: 'root', role: 'root' }));
  addUser('alice');
  tx(() => st.roleAdd({ name: 'r' }));
  grant('r', PermType.READWRITE, 'foo', '');
  grant('r', PermType.READ, 'pre/', 'pre0');
  tx(() => st.userGrantRole({ user: 'alice', role: 'r' }));
  tx(() => st.enable());
  return { username: 'alice', revision: st.revision() };
}

describe('AuthStore', () => {
  it('refuses a permission etcd 3.5+ refuses, before looking up the role', () => {
    const g = (key: string, rangeEnd: string | Buffer, role = 'r'): string =>
      errOf(() => st.roleGrantPermission({ name: role, perm: { permType: PermType.READ, key: b(key), rangeEnd: typeof rangeEnd === 'string' ? b(rangeEnd) : rangeEnd } }));
    tx(() => st.roleAdd({ name: 'r' }));
    expect(errOf(() => st.roleGrantPermission({ name: 'r', perm: null }))).toBe('etcdserver: permission not given');
    expect(g('', '')).toBe('etcdserver: invalid auth management');
    expect(g('', Buffer.from([0]))).toBe('etcdserver: invalid auth management');
    expect(g('b', 'a')).toBe('etcdserver: invalid auth management');
    expect(g('b', 'b')).toBe('etcdserver: invalid auth management');
    expect(g('b', 'a', 'nope')).toBe('etcdserver: invalid auth management');
    expect(g('b', 'c', 'nope')).toBe('etcdserver: role name not found');
    expect(g('b', '')).toBe('no error');
    expect(g('b', 'c')).toBe('no error');
    expect(g('b', Buffer.from([0]))).toBe('no error');
    expect(g(Buffer.from([0]).toString('latin1'), Buffer.from([0]))).toBe('no error');
  });

  it('updates a granted permission in place only when it is the first with its key, as etcd does', () => {
    tx(() => st.roleAdd({ name: 'r' }));
    grant('r', PermType.READ, 'a', '');
    grant('r', PermType.READ, 'a', 'b');
    // etcd's sort.Search finds ("a", "") first: ("a", "b") is granted a second time.
    grant('r', PermType.WRITE, 'a', 'b');
    grant('r', PermType.WRITE, 'a', '');
    expect(st.roleGet('r').map((p) => [p.permType, p.key.toString(), p.rangeEnd.toString()])).toEqual([
      [PermType.WRITE, 'a', ''],
      [PermType.READ, 'a', 'b'],
      [PermType.WRITE, 'a', 'b'],
    ]);
  });

  it('answers etcd errors for users and roles', () => {
    expect(errOf(() => st.userAdd({ name: '', password: '', hashedPassword: '', options: null }))).toBe('etcdserver: user name is empty');
    addUser('u');
    expect(errOf(() => st.userAdd({ name: 'u', password: '', hashedPassword: '', options: null }))).toBe('etcdserver: user name already exists');
    expect(errOf(() => st.userGrantRole({ user: 'u', role: 'nope' }))).toBe('etcdserver: role name not found');
    expect(errOf(() => st.userGrantRole({ user: 'x', role: 'root' }))).toBe('etcdserver: user name not found');
    expect(errOf(() => st.userRevokeRole({ name: 'u', role: 'r' }))).toBe('etcdserver: role is not granted to the user');
    expect(errOf(() => st.roleAdd({ name: '' }))).toBe('etcdserver: role name is empty');
    tx(() => st.roleAdd({ name: 'r' }));
    expect(errOf(() => st.roleAdd({ name: 'r' }))).toBe('etcdserver: role name already exists');
    expect(errOf(() => st.roleRevokePermission({ role: 'r', key: b('k'), rangeEnd: none }))).toBe('etcdserver: permission is not granted to the role');
    expect(errOf(() => st.enable())).toBe('etcdserver: root user does not exist');
    addUser('root');
    expect(errOf(() => st.enable())).toBe('etcdserver: root user does not have root role');
  });

  it('counts the auth revision and keeps everything across a reopen', async () => {
    const ai = setupEnabled();
    expect(st.isEnabled()).toBe(true);
    const rev = st.revision();
    expect(rev).toBeGreaterThan(0);
    await be.close();
    be = Backend.open(path.join(dir, 'db'));
    const again = new AuthStore(be.subDb('auth'));
    expect(again.isEnabled()).toBe(true);
    expect(again.revision()).toBe(rev);
    expect(again.userList()).toEqual(['alice', 'root']);
    expect(again.userGet('alice')).toEqual(['r']);
    expect(again.roleGet('r').map((p) => [p.permType, p.key.toString(), p.rangeEnd.toString()])).toEqual([
      [PermType.READWRITE, 'foo', ''],
      [PermType.READ, 'pre/', 'pre0'],
    ]);
    expect(() => again.checkPut(ai, b('foo'))).not.toThrow();
  });

  it('checks keys and ranges by permission type', () => {
    const ai = setupEnabled();
    expect(() => st.checkPut(ai, b('foo'))).not.toThrow();
    expect(() => st.checkRange(ai, b('pre/x'), none)).not.toThrow();
    expect(() => st.checkRange(ai, b('pre/'), b('pre0'))).not.toThrow();
    expect(() => st.checkPut(ai, b('pre/x'))).toThrow('etcdserver: permission denied');
    expect(() => st.checkRange(ai, b('p'), b('q'))).toThrow('etcdserver: permission denied');
    expect(() => st.checkRange(null, b('foo'), none)).toThrow('etcdserver: user name is empty');
    expect(() => st.checkRange({ username: 'ghost', revision: st.revision() }, b('foo'), none)).toThrow('etcdserver: permission denied');
    const root = { username: 'root', revision: st.revision() };
    expect(() => st.checkPut(root, b('anything'))).not.toThrow();
    expect(() => st.checkAdmin(root)).not.toThrow();
    expect(() => st.checkAdmin(ai)).toThrow('etcdserver: permission denied');
    expect(() => st.checkAdmin(null)).toThrow('etcdserver: user name is empty');
  });

  it('refuses a request made before the last auth change (old revision)', () => {
    const ai = setupEnabled();
    tx(() => st.roleAdd({ name: 'other' }));
    expect(() => st.checkPut(ai, b('foo'))).toThrow('etcdserver: revision of auth store is old');
  });

  it('sees permission changes at once', () => {
    setupEnabled();
    tx(() => st.roleRevokePermission({ role: 'r', key: b('foo'), rangeEnd: none }));
    expect(() => st.checkPut({ username: 'alice', revision: st.revision() }, b('foo'))).toThrow('etcdserver: permission denied');
    tx(() => st.roleDelete({ role: 'r' }));
    expect(st.userGet('alice')).toEqual([]);
  });

  it('protects root while enabled', () => {
    setupEnabled();
    expect(errOf(() => st.userDelete({ name: 'root' }))).toBe('etcdserver: invalid auth management');
    expect(errOf(() => st.roleDelete({ role: 'root' }))).toBe('etcdserver: invalid auth management');
    expect(errOf(() => st.userRevokeRole({ name: 'root', role: 'root' }))).toBe('etcdserver: invalid auth management');
  });

  it('checks every compare and op of a txn, nested ones included', () => {
    const ai = setupEnabled();
    const put = (key: string): pb.RequestOp => ({ requestPut: { key: b(key), value: b('v'), lease: '0', prevKv: false, ignoreValue: false, ignoreLease: false } }) as unknown as pb.RequestOp;
    const txn = (ops: pb.RequestOp[]): pb.TxnRequest => ({ compare: [], success: ops, failure: [] }) as unknown as pb.TxnRequest;
    const noLease = (): void => undefined;
    expect(() => st.checkTxn(ai, txn([put('foo')]), noLease)).not.toThrow();
    expect(() => st.checkTxn(ai, txn([put('foo'), put('bar')]), noLease)).toThrow('etcdserver: permission denied');
    expect(() => st.checkTxn(ai, txn([{ requestTxn: txn([put('bar')]) } as unknown as pb.RequestOp]), noLease)).toThrow('etcdserver: permission denied');
  });
});
