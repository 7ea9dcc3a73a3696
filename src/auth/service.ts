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

  /** etcd's AuthInfoFromCtx: a token wins; else the TLS CN; else nobody (null). */
  authInfo(ctx: CallAuth | undefined): AuthInfo | null {
    if (ctx?.token) {
      const ai = this.d.tokens.info(ctx.token, this.d.store.revision());
      if (!ai) throw etcdError('InvalidAuthToken');
      return ai;
    }
    if (ctx?.commonName) return { username: ctx.commonName, revision: this.d.store.revision() };
    return null;
  }

  private async run<T extends { header: pb.ResponseHeader | null }>(req: Partial<pb.InternalRaftRequest>, ctx: CallAuth | undefined): Promise<T> {
    const resp = (await this.d.propose(req, this.authInfo(ctx))) as T;
    resp.header = this.d.header();
    return resp;
  }

  async authenticate(req: pb.AuthenticateRequest, ctx?: CallAuth): Promise<pb.AuthenticateResponse> {
    await this.d.linearizableRead();
    const { store } = this.d;
    if (!store.isEnabled()) throw etcdError('AuthNotEnabled');
    const u = store.getUser(req.name);
    if (!u) throw etcdError('AuthFailed');
    // etcd's CheckPassword: a user added with no_password cannot authenticate with a password.
    if (u.noPassword) throw etcdError('NoPasswordUser');
    if (!(await verifyPassword(req.password, u.password))) throw etcdError('AuthFailed');
    const internal: pb.InternalAuthenticateRequest = { name: req.name, password: '', simpleToken: this.d.tokens.genPrefix() };
    // Proposed like any request: a token sent along must resolve (it is not otherwise used).
    return this.run<pb.AuthenticateResponse>({ authenticate: internal }, ctx);
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
    const hashed = req.hashedPassword || (await hashPassword(req.password, this.d.bcryptCost));
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
    // etcd's doSerialize resolves the token first: one it cannot resolve is refused with auth off too.
    const ai = this.authInfo(ctx);
    if (!this.d.store.isEnabled()) return;
    this.d.store.checkRange(ai, key, rangeEnd);
  }

  /**
   * etcd's checkLeaseTimeToLive: with auth on, the caller must be able to read every key of the
   * lease (auth off: anyone; `leaseKeys` is then not called).
   */
  checkLeaseKeys(ctx: CallAuth | undefined, leaseKeys: () => Buffer[]): void {
    if (!this.d.store.isEnabled()) return;
    const ai = this.authInfo(ctx);
    if (!ai) throw etcdError('UserEmpty');
    for (const key of leaseKeys()) this.d.store.checkRange(ai, key, Buffer.alloc(0));
  }

  /** Throws etcd's error unless the caller has the root role (auth disabled: anyone). */
  checkAdmin(ctx: CallAuth | undefined): void {
    // As etcd's isPermitted: the token is resolved first, with auth off too.
    const ai = this.authInfo(ctx);
    if (!this.d.store.isEnabled()) return;
    this.d.store.checkAdmin(ai);
  }
}
