// The auth store: users, roles, their key permissions, the enabled flag and the auth
// revision. Mutations run only on the apply path (inside the backend batch, on every member
// in log order); reads and permission checks use the in-memory copy. Semantics and errors
// follow etcd's auth/store.go and etcdserver/apply_auth.go.
import assert from 'node:assert';
import type { SubDb } from '../backend/backend';
import { etcdError } from '../errors';
import type * as pb from '../pb/types';
import { IntervalSet, intervalOf, type KeyInterval } from './range_perms';

export const ROOT_USER = 'root';
export const ROOT_ROLE = 'root';

/** authpb.Permission.Type */
export const PermType = { READ: 0, WRITE: 1, READWRITE: 2 } as const;

/** Who a request runs as: the user and the auth revision its token (or check) saw. */
export interface AuthInfo {
  username: string;
  revision: number;
}

export interface UserRecord {
  name: string;
  /** scrypt hash (see password.ts); '' for a no-password user. */
  password: string;
  roles: string[];
  noPassword: boolean;
}

export interface PermRecord {
  permType: number;
  key: Buffer;
  rangeEnd: Buffer;
}

export interface RoleRecord {
  name: string;
  perms: PermRecord[];
}

interface PermJson {
  t: number;
  k: string;
  e: string;
}

const MAX_USERS = 100_000;
const MAX_ROLES = 100_000;
const MAX_PERMS_PER_ROLE = 100_000;

const USER_PREFIX = 'u/';
const ROLE_PREFIX = 'r/';
const ENABLED_KEY = Buffer.from('enabled');
const REVISION_KEY = Buffer.from('revision');

/**
 * etcd 3.5+'s isValidPermissionRange: a permission names a non-empty key, and a range end (if
 * any) after it or "\0" (every key from `key` on).
 */
export function isValidPermissionRange(key: Buffer, rangeEnd: Buffer): boolean {
  if (key.length === 0) return false;
  if (rangeEnd.length === 0) return true;
  if (Buffer.compare(key, rangeEnd) < 0) return true;
  return rangeEnd.length === 1 && rangeEnd[0] === 0;
}

interface MergedPerms {
  read: IntervalSet;
  write: IntervalSet;
}

export class AuthStore {
  private readonly users = new Map<string, UserRecord>();
  private readonly roles = new Map<string, RoleRecord>();
  private enabled = false;
  private rev = 0;
  private permCache = new Map<string, MergedPerms>();
  private readonly enabledListeners: Array<(enabled: boolean) => void> = [];
  private readonly userChangeListeners: Array<(username: string) => void> = [];

  /** `db` is a backend sub-database of this store alone. */
  constructor(private readonly db: SubDb) {
    this.reload();
  }

  /** (Re)read everything from the backend, e.g. at start or after a snapshot replaced it. */
  reload(): void {
    this.users.clear();
    this.roles.clear();
    for (const { key, value } of this.db.getRange({})) {
      const k = key.toString('utf8');
      if (k.startsWith(USER_PREFIX)) {
        const u = JSON.parse(value.toString('utf8')) as UserRecord;
        this.users.set(u.name, u);
      } else if (k.startsWith(ROLE_PREFIX)) {
        const r = JSON.parse(value.toString('utf8')) as { name: string; perms: PermJson[] };
        this.roles.set(r.name, {
          name: r.name,
          perms: r.perms.map((p) => ({ permType: p.t, key: Buffer.from(p.k, 'base64'), rangeEnd: Buffer.from(p.e, 'base64') })),
        });
      }
    }
    const en = this.db.get(ENABLED_KEY);
    const wasEnabled = this.enabled;
    this.enabled = en !== undefined && en.length === 1 && en[0] === 1;
    const rv = this.db.get(REVISION_KEY);
    this.rev = rv && rv.length === 8 ? Number(rv.readBigUInt64BE(0)) : 0;
    this.permCache.clear();
    if (wasEnabled !== this.enabled) for (const l of this.enabledListeners) l(this.enabled);
  }

  /** Called after enable/disable is applied (token providers drop their tokens on disable). */
  onEnabledChange(fn: (enabled: boolean) => void): void {
    assert(this.enabledListeners.length < 16);
    this.enabledListeners.push(fn);
  }

  /** Called when a user is deleted or changes password (its tokens must stop working). */
  onUserInvalidated(fn: (username: string) => void): void {
    assert(this.userChangeListeners.length < 16);
    this.userChangeListeners.push(fn);
  }

  isEnabled(): boolean {
    return this.enabled;
  }

  revision(): number {
    return this.rev;
  }

  getUser(name: string): UserRecord | undefined {
    return this.users.get(name);
  }

  hasRole(user: string, role: string): boolean {
    return this.users.get(user)?.roles.includes(role) ?? false;
  }

  // ------------------------------------------------------------ persistence

  private commitRevision(): void {
    this.rev++;
    const b = Buffer.alloc(8);
    b.writeBigUInt64BE(BigInt(this.rev));
    this.db.putSync(REVISION_KEY, b);
    this.permCache.clear();
  }

  private putUser(u: UserRecord): void {
    assert(this.users.has(u.name) || this.users.size < MAX_USERS, 'too many users');
    this.users.set(u.name, u);
    this.db.putSync(Buffer.from(USER_PREFIX + u.name), Buffer.from(JSON.stringify(u)));
  }

  private putRole(r: RoleRecord): void {
    assert(this.roles.has(r.name) || this.roles.size < MAX_ROLES, 'too many roles');
    assert(r.perms.length <= MAX_PERMS_PER_ROLE, 'too many permissions in a role');
    this.roles.set(r.name, r);
    const json = {
      name: r.name,
      perms: r.perms.map((p): PermJson => ({ t: p.permType, k: p.key.toString('base64'), e: p.rangeEnd.toString('base64') })),
    };
    this.db.putSync(Buffer.from(ROLE_PREFIX + r.name), Buffer.from(JSON.stringify(json)));
  }

  /**
   * Fills an empty store with users, roles, the enabled flag and the auth revision read from
   * another database (etcdutl restoring a snapshot of etcd). Only inside a backend batch.
   */
  loadRestored(users: readonly UserRecord[], roles: readonly RoleRecord[], enabled: boolean, revision: number): void {
    assert(this.users.size === 0 && this.roles.size === 0 && !this.enabled && this.rev === 0, 'loadRestored into a store that has data');
    assert(Number.isSafeInteger(revision) && revision >= 0);
    for (const u of users) this.putUser(u);
    for (const r of roles) this.putRole(r);
    const b = Buffer.alloc(8);
    b.writeBigUInt64BE(BigInt(revision));
    this.db.putSync(REVISION_KEY, b);
    this.rev = revision;
    if (enabled) {
      const root = this.users.get(ROOT_USER);
      assert(root !== undefined && root.roles.includes(ROOT_ROLE), 'auth enabled without a root user in the root role');
      this.db.putSync(ENABLED_KEY, Buffer.from([1]));
      this.enabled = true;
    }
    this.permCache.clear();
  }

  // ------------------------------------------------------------ apply-side mutations

  enable(): void {
    if (this.enabled) return;
    const root = this.users.get(ROOT_USER);
    if (!root) throw etcdError('RootUserNotExist');
    if (!root.roles.includes(ROOT_ROLE)) throw etcdError('RootRoleNotExist');
    this.db.putSync(ENABLED_KEY, Buffer.from([1]));
    this.enabled = true;
    this.permCache.clear();
    for (const l of this.enabledListeners) l(true);
  }

  disable(): void {
    if (!this.enabled) return;
    this.db.putSync(ENABLED_KEY, Buffer.from([0]));
    this.commitRevision();
    this.enabled = false;
    for (const l of this.enabledListeners) l(false);
  }

  /** `hashedPassword` is computed before the proposal so every member stores the same hash. */
  userAdd(r: pb.AuthUserAddRequest): void {
    if (r.name.length === 0) throw etcdError('UserEmpty');
    if (this.users.has(r.name)) throw etcdError('UserAlreadyExist');
    const noPassword = r.options?.noPassword ?? false;
    this.putUser({ name: r.name, password: noPassword ? '' : r.hashedPassword, roles: [], noPassword });
    this.commitRevision();
  }

  userDelete(r: pb.AuthUserDeleteRequest): void {
    if (this.enabled && r.name === ROOT_USER) throw etcdError('InvalidAuthMgmt');
    if (!this.users.has(r.name)) throw etcdError('UserNotFound');
    this.users.delete(r.name);
    this.db.removeSync(Buffer.from(USER_PREFIX + r.name));
    this.commitRevision();
    for (const l of this.userChangeListeners) l(r.name);
  }

  userChangePassword(r: pb.AuthUserChangePasswordRequest): void {
    const u = this.users.get(r.name);
    if (!u) throw etcdError('UserNotFound');
    this.putUser({ ...u, password: u.noPassword ? '' : r.hashedPassword });
    this.commitRevision();
    for (const l of this.userChangeListeners) l(r.name);
  }

  userGrantRole(r: pb.AuthUserGrantRoleRequest): void {
    const u = this.users.get(r.user);
    if (!u) throw etcdError('UserNotFound');
    if (r.role !== ROOT_ROLE && !this.roles.has(r.role)) throw etcdError('RoleNotFound');
    if (u.roles.includes(r.role)) return; // etcd ignores a duplicate grant
    this.putUser({ ...u, roles: [...u.roles, r.role].sort() });
    this.commitRevision();
  }

  userRevokeRole(r: pb.AuthUserRevokeRoleRequest): void {
    if (this.enabled && r.name === ROOT_USER && r.role === ROOT_ROLE) throw etcdError('InvalidAuthMgmt');
    const u = this.users.get(r.name);
    if (!u) throw etcdError('UserNotFound');
    if (!u.roles.includes(r.role)) throw etcdError('RoleNotGranted');
    this.putUser({ ...u, roles: u.roles.filter((x) => x !== r.role) });
    this.commitRevision();
  }

  roleAdd(r: pb.AuthRoleAddRequest): void {
    if (r.name.length === 0) throw etcdError('RoleEmpty');
    if (this.roles.has(r.name)) throw etcdError('RoleAlreadyExist');
    this.putRole({ name: r.name, perms: [] });
    this.commitRevision();
  }

  roleDelete(r: pb.AuthRoleDeleteRequest): void {
    if (this.enabled && r.role === ROOT_ROLE) throw etcdError('InvalidAuthMgmt');
    if (!this.roles.has(r.role)) throw etcdError('RoleNotFound');
    this.roles.delete(r.role);
    this.db.removeSync(Buffer.from(ROLE_PREFIX + r.role));
    for (const u of [...this.users.values()]) {
      if (u.roles.includes(r.role)) this.putUser({ ...u, roles: u.roles.filter((x) => x !== r.role) });
    }
    this.commitRevision();
  }

  roleGrantPermission(r: pb.AuthRoleGrantPermissionRequest): void {
    // etcd 3.5+ checks the permission before the role (3.4 stored any range, and crashed on none).
    if (!r.perm) throw etcdError('PermissionNotGiven');
    const perm = r.perm;
    const key = Buffer.from(perm.key ?? Buffer.alloc(0));
    const rangeEnd = Buffer.from(perm.rangeEnd ?? Buffer.alloc(0));
    if (!isValidPermissionRange(key, rangeEnd)) throw etcdError('InvalidAuthMgmt');
    const role = this.roles.get(r.name);
    if (!role) throw etcdError('RoleNotFound');
    const perms = role.perms.map((p) => ({ ...p }));
    // As etcd: only the first permission whose key is >= the new key can be updated in place
    // (sort.Search on the key-sorted list); any other match gets a second entry.
    const idx = perms.findIndex((p) => Buffer.compare(p.key, key) >= 0);
    const same = idx >= 0 && perms[idx]!.key.equals(key) && perms[idx]!.rangeEnd.equals(rangeEnd) ? perms[idx] : undefined;
    if (same) same.permType = perm.permType;
    else {
      perms.push({ permType: perm.permType, key, rangeEnd });
      perms.sort((a, b) => Buffer.compare(a.key, b.key));
    }
    this.putRole({ name: role.name, perms });
    this.commitRevision();
  }

  roleRevokePermission(r: pb.AuthRoleRevokePermissionRequest): void {
    const role = this.roles.get(r.role);
    if (!role) throw etcdError('RoleNotFound');
    const key = r.key ?? Buffer.alloc(0);
    const rangeEnd = r.rangeEnd ?? Buffer.alloc(0);
    const perms = role.perms.filter((p) => !(p.key.equals(key) && p.rangeEnd.equals(rangeEnd)));
    if (perms.length === role.perms.length) throw etcdError('PermissionNotGranted');
    this.putRole({ name: role.name, perms });
    this.commitRevision();
  }

  // ------------------------------------------------------------ reads

  userGet(name: string): string[] {
    const u = this.users.get(name);
    if (!u) throw etcdError('UserNotFound');
    return [...u.roles];
  }

  userList(): string[] {
    return [...this.users.keys()].sort();
  }

  roleGet(name: string): pb.Permission[] {
    const role = this.roles.get(name);
    if (!role) throw etcdError('RoleNotFound');
    // etcd 3.5+ (rootPerm): the root role reads and writes every key, whatever was granted to it.
    if (name === ROOT_ROLE) return [{ permType: PermType.READWRITE, key: Buffer.alloc(0), rangeEnd: Buffer.from([0]) }];
    return role.perms.map((p) => ({ permType: p.permType, key: p.key, rangeEnd: p.rangeEnd }));
  }

  roleList(): string[] {
    return [...this.roles.keys()].sort();
  }

  // ------------------------------------------------------------ permission checks

  private merged(username: string): MergedPerms | undefined {
    let m = this.permCache.get(username);
    if (m) return m;
    const u = this.users.get(username);
    if (!u) return undefined;
    const read: KeyInterval[] = [];
    const write: KeyInterval[] = [];
    for (const roleName of u.roles) {
      for (const p of this.roles.get(roleName)?.perms ?? []) {
        const iv = intervalOf(p.key, p.rangeEnd);
        if (p.permType === PermType.READ || p.permType === PermType.READWRITE) read.push(iv);
        if (p.permType === PermType.WRITE || p.permType === PermType.READWRITE) write.push(iv);
      }
    }
    m = { read: new IntervalSet(read), write: new IntervalSet(write) };
    // The cache is bounded by the user count and cleared on every auth change.
    this.permCache.set(username, m);
    return m;
  }

  private isOpPermitted(ai: AuthInfo | null, key: Buffer, rangeEnd: Buffer, write: boolean): void {
    if (!this.enabled) return;
    if (!ai || ai.revision === 0 || ai.username === '') throw etcdError('UserEmpty');
    if (ai.revision < this.rev) throw etcdError('AuthOldRevision');
    const u = this.users.get(ai.username);
    if (!u) throw etcdError('PermissionDenied');
    if (u.roles.includes(ROOT_ROLE)) return;
    const m = this.merged(ai.username);
    if (m && (write ? m.write : m.read).covers(key, rangeEnd)) return;
    throw etcdError('PermissionDenied');
  }

  checkRange(ai: AuthInfo | null, key: Buffer, rangeEnd: Buffer): void {
    this.isOpPermitted(ai, key, rangeEnd, false);
  }

  checkPut(ai: AuthInfo | null, key: Buffer): void {
    this.isOpPermitted(ai, key, Buffer.alloc(0), true);
  }

  checkDeleteRange(ai: AuthInfo | null, key: Buffer, rangeEnd: Buffer): void {
    this.isOpPermitted(ai, key, rangeEnd, true);
  }

  /** etcd's IsAdminPermitted(ai) == nil, with auth on: the caller is a user with the root role. */
  isAdmin(ai: AuthInfo | null): boolean {
    if (!ai || ai.username === '') return false;
    return this.users.get(ai.username)?.roles.includes(ROOT_ROLE) ?? false;
  }

  checkAdmin(ai: AuthInfo | null): void {
    if (!this.enabled) return;
    if (!ai || ai.username === '') throw etcdError('UserEmpty');
    const u = this.users.get(ai.username);
    if (!u) throw etcdError('UserNotFound');
    if (!u.roles.includes(ROOT_ROLE)) throw etcdError('PermissionDenied');
  }

  /**
   * etcd's checkTxnAuth: compares and every op of both branches, recursively; a put as a plain Put
   * (checkPutAuth: the key, then every key of the lease it attaches to, which `checkLeasePuts`
   * checks, then prev_kv's read).
   */
  checkTxn(ai: AuthInfo | null, t: pb.TxnRequest, checkLeasePuts: (ai: AuthInfo | null, leaseId: string) => void): void {
    for (const c of t.compare ?? []) this.checkRange(ai, c.key, c.rangeEnd);
    for (const op of [...(t.success ?? []), ...(t.failure ?? [])]) {
      if (op.requestRange) this.checkRange(ai, op.requestRange.key, op.requestRange.rangeEnd);
      else if (op.requestPut) {
        this.checkPut(ai, op.requestPut.key);
        checkLeasePuts(ai, op.requestPut.lease);
        if (op.requestPut.prevKv) this.checkRange(ai, op.requestPut.key, Buffer.alloc(0));
      } else if (op.requestDeleteRange) {
        const d = op.requestDeleteRange;
        if (d.prevKv) this.checkRange(ai, d.key, d.rangeEnd);
        this.checkDeleteRange(ai, d.key, d.rangeEnd);
      } else if (op.requestTxn) this.checkTxn(ai, op.requestTxn, checkLeasePuts);
    }
  }
}
