// etcdserverpb.Auth on one member: resolves callers (token or TLS CN) to users, checks
// passwords before proposing Authenticate, hashes passwords before proposing user changes
// (so the log never carries them in clear text), and sends everything through Raft.
import { etcdError, isEtcdError, type EtcdError } from '../errors';
import type * as pb from '../pb/types';
import type { AuthApi, CallAuth } from '../server/types';
import { hashPassword, verifyPassword } from './password';
import type { AuthInfo, AuthStore } from './store';
import type { TokenProvider } from './tokens';

export interface AuthServiceDeps {
  store: AuthStore;
  tokens: TokenProvider;
  /** Propose an entry as `ai` (null: nobody) and wait for its applied response. */
  propose(req: Partial<pb.InternalRaftRequest>, ai: AuthInfo | null): Promise<unknown>;
  linearizableRead(): Promise<void>;
  header(): pb.ResponseHeader;
  /** --bcrypt-cost for new password hashes (default 10). */
  bcryptCost?: number;
}

/** The refusals etcd's isWatchPermitted names as they are; any other is "permission denied". */
const WATCH_REFUSALS_NAMED: ReadonlySet<string> = new Set(
  (['InvalidAuthToken', 'UserEmpty', 'AuthOldRevision'] as const).map((n) => etcdError(n).message),
);

export class AuthService implements AuthApi {
  constructor(private readonly d: AuthServiceDeps) {}

  /**
   * etcd 3.6's AuthInfoFromCtx: with auth on, a token wins (one that does not resolve is refused);
   * else the TLS CN; else nobody (null). With auth off a token is not looked at (3.4 refused one it
   * could not resolve even then).
   */
  authInfo(ctx: CallAuth | undefined): AuthInfo | null {
    if (ctx?.token && this.d.store.isEnabled()) {
      const ai = this.d.tokens.info(ctx.token, this.d.store.revision());
      if (!ai) throw etcdError('InvalidAuthToken');
      return ai;
    }
    if (ctx?.commonName) return { username: ctx.commonName, revision: this.d.store.revision() };
    return null;
  }

  /** etcd's requireAuthInfo: with auth on, the caller must be someone (a token that resolves, or a CN). */
  requireUser(ctx: CallAuth | undefined): AuthInfo | null {
    if (!this.d.store.isEnabled()) return null;
    const ai = this.authInfo(ctx);
    if (!ai) throw etcdError('UserEmpty');
    return ai;
  }

  private async run<T extends { header: pb.ResponseHeader | null }>(req: Partial<pb.InternalRaftRequest>, ctx: CallAuth | undefined): Promise<T> {
    const resp = (await this.d.propose(req, this.authInfo(ctx))) as T;
    resp.header = this.d.header();
    return resp;
  }

  // etcd 3.6 proposes Authenticate without looking at a token sent along (3.4 refused one it could
  // not resolve): no CallAuth here.
  async authenticate(req: pb.AuthenticateRequest): Promise<pb.AuthenticateResponse> {
    await this.d.linearizableRead();
    const { store } = this.d;
    if (!store.isEnabled()) throw etcdError('AuthNotEnabled');
    const u = store.getUser(req.name);
    if (!u) throw etcdError('AuthFailed');
    // etcd's CheckPassword: a user added with no_password cannot authenticate with a password.
    if (u.noPassword) throw etcdError('NoPasswordUser');
    if (!(await verifyPassword(req.password, u.password))) throw etcdError('AuthFailed');
    const internal: pb.InternalAuthenticateRequest = { name: req.name, password: '', simpleToken: this.d.tokens.genPrefix() };
    return this.run<pb.AuthenticateResponse>({ authenticate: internal }, undefined);
  }

  authEnable(req: pb.AuthEnableRequest, ctx?: CallAuth): Promise<pb.AuthEnableResponse> {
    return this.run({ authEnable: req }, ctx);
  }

  authDisable(req: pb.AuthDisableRequest, ctx?: CallAuth): Promise<pb.AuthDisableResponse> {
    return this.run({ authDisable: req }, ctx);
  }

  async userAdd(req: pb.AuthUserAddRequest, ctx?: CallAuth): Promise<pb.AuthUserAddResponse> {
    // An empty name is refused when applied (after the caller's token and admin checks), as etcd does.
    const noPassword = req.options?.noPassword ?? false;
    const hashed = noPassword ? '' : req.hashedPassword || (await hashPassword(req.password, this.d.bcryptCost));
    return this.run({ authUserAdd: { name: req.name, password: '', options: req.options, hashedPassword: hashed } }, ctx);
  }

  userGet(req: pb.AuthUserGetRequest, ctx?: CallAuth): Promise<pb.AuthUserGetResponse> {
    return this.run({ authUserGet: req }, ctx);
  }

  userList(req: pb.AuthUserListRequest, ctx?: CallAuth): Promise<pb.AuthUserListResponse> {
    return this.run({ authUserList: req }, ctx);
  }

  userDelete(req: pb.AuthUserDeleteRequest, ctx?: CallAuth): Promise<pb.AuthUserDeleteResponse> {
    return this.run({ authUserDelete: req }, ctx);
  }

  async userChangePassword(req: pb.AuthUserChangePasswordRequest, ctx?: CallAuth): Promise<pb.AuthUserChangePasswordResponse> {
    // etcd 3.5+ hashes only a password that is not empty: an empty one is stored as no hash at all,
    // which no password matches (the user can no longer authenticate; UserAdd hashes "" like any).
    const hashed = req.hashedPassword || (req.password === '' ? '' : await hashPassword(req.password, this.d.bcryptCost));
    return this.run({ authUserChangePassword: { name: req.name, password: '', hashedPassword: hashed } }, ctx);
  }

  userGrantRole(req: pb.AuthUserGrantRoleRequest, ctx?: CallAuth): Promise<pb.AuthUserGrantRoleResponse> {
    return this.run({ authUserGrantRole: req }, ctx);
  }

  userRevokeRole(req: pb.AuthUserRevokeRoleRequest, ctx?: CallAuth): Promise<pb.AuthUserRevokeRoleResponse> {
    return this.run({ authUserRevokeRole: req }, ctx);
  }

  roleAdd(req: pb.AuthRoleAddRequest, ctx?: CallAuth): Promise<pb.AuthRoleAddResponse> {
    return this.run({ authRoleAdd: req }, ctx);
  }

  roleGet(req: pb.AuthRoleGetRequest, ctx?: CallAuth): Promise<pb.AuthRoleGetResponse> {
    return this.run({ authRoleGet: req }, ctx);
  }

  roleList(req: pb.AuthRoleListRequest, ctx?: CallAuth): Promise<pb.AuthRoleListResponse> {
    return this.run({ authRoleList: req }, ctx);
  }

  roleDelete(req: pb.AuthRoleDeleteRequest, ctx?: CallAuth): Promise<pb.AuthRoleDeleteResponse> {
    return this.run({ authRoleDelete: req }, ctx);
  }

  roleGrantPermission(req: pb.AuthRoleGrantPermissionRequest, ctx?: CallAuth): Promise<pb.AuthRoleGrantPermissionResponse> {
    return this.run({ authRoleGrantPermission: req }, ctx);
  }

  roleRevokePermission(req: pb.AuthRoleRevokePermissionRequest, ctx?: CallAuth): Promise<pb.AuthRoleRevokePermissionResponse> {
    return this.run({ authRoleRevokePermission: req }, ctx);
  }

  watchRefusal(ctx: CallAuth | undefined, key: Buffer, rangeEnd: Buffer): EtcdError | undefined {
    try {
      this.d.store.checkRange(this.authInfo(ctx), key, rangeEnd);
      return undefined;
    } catch (e) {
      // etcd names an invalid token, a missing user and a stale revision; anything else is a denial.
      if (isEtcdError(e) && WATCH_REFUSALS_NAMED.has(e.message)) return e;
      return etcdError('PermissionDenied');
    }
  }

  /** Throws etcd's error unless the caller may read [key, rangeEnd). */
  checkRange(ctx: CallAuth | undefined, key: Buffer, rangeEnd: Buffer): void {
    const ai = this.authInfo(ctx);
    if (!this.d.store.isEnabled()) return;
    this.d.store.checkRange(ai, key, rangeEnd);
  }

  /**
   * etcd 3.6's checks of leased keys against a caller (checkLeaseTimeToLive and checkLeaseLeases
   * with `read`, checkLeaseRenew with `write`): with auth on there must be a caller; the root role
   * may do anything; anyone else needs that permission on every key (no keys: nothing to check).
   * Returns the auth revision the check saw: etcd refuses the answer as "auth revision is old" when
   * it changed before the answer left (authRevisionChanged).
   */
  checkLeaseKeys(ctx: CallAuth | undefined, leaseKeys: () => Iterable<Buffer>, perm: 'read' | 'write'): number {
    const rev = this.d.store.revision();
    if (!this.d.store.isEnabled()) return rev;
    const ai = this.authInfo(ctx);
    if (!ai) throw etcdError('UserEmpty');
    if (this.d.store.isAdmin(ai)) return rev;
    const empty = Buffer.alloc(0);
    for (const key of leaseKeys()) {
      if (perm === 'read') this.d.store.checkRange(ai, key, empty);
      else this.d.store.checkPut(ai, key);
    }
    return rev;
  }

  /** True when auth is on and its revision is no longer `since` (etcd then answers "auth revision is old"). */
  authRevisionChanged(since: number): boolean {
    return this.d.store.isEnabled() && this.d.store.revision() !== since;
  }

  /** Throws etcd's error unless the caller has the root role (auth disabled: anyone). */
  checkAdmin(ctx: CallAuth | undefined): void {
    const ai = this.authInfo(ctx);
    if (!this.d.store.isEnabled()) return;
    this.d.store.checkAdmin(ai);
  }
}
