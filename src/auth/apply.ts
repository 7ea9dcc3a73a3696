// The auth entries of the Raft log, applied to the auth store (responses without header; the
// server fills it). Permission checks happen before, in the applier (etcd's authApplierV3).
import { etcdError } from '../errors';
import type * as pb from '../pb/types';
import type { AuthStore } from './store';
import type { TokenProvider } from './tokens';

/** etcd's needAdminPermission. */
export function needsAdmin(r: pb.InternalRaftRequest): boolean {
  return Boolean(
    r.authEnable || r.authDisable || r.authUserAdd || r.authUserDelete || r.authUserChangePassword ||
      r.authUserGrantRole || r.authUserRevokeRole || r.authRoleAdd || r.authRoleGrantPermission ||
      r.authRoleRevokePermission || r.authRoleDelete || r.authUserList || r.authRoleList,
  );
}

/** The response of an auth entry, or undefined when `r` is not one. */
export function applyAuthRequest(store: AuthStore, tokens: TokenProvider, r: pb.InternalRaftRequest, index: number): object | undefined {
  const empty = { header: null };
  if (r.authEnable) {
    store.enable();
    return empty;
  }
  if (r.authDisable) {
    store.disable();
    return empty;
  }
  if (r.authenticate) {
    if (!store.isEnabled()) throw etcdError('AuthNotEnabled');
    const u = store.getUser(r.authenticate.name);
    if (!u || u.noPassword) throw etcdError('AuthFailed');
    return { header: null, token: tokens.assign(u.name, store.revision(), index, r.authenticate.simpleToken) };
  }
  if (r.authUserAdd) {
    store.userAdd(r.authUserAdd);
    return empty;
  }
  if (r.authUserDelete) {
    store.userDelete(r.authUserDelete);
    return empty;
  }
  if (r.authUserChangePassword) {
    store.userChangePassword(r.authUserChangePassword);
    return empty;
  }
  if (r.authUserGrantRole) {
    store.userGrantRole(r.authUserGrantRole);
    return empty;
  }
  if (r.authUserRevokeRole) {
    store.userRevokeRole(r.authUserRevokeRole);
    return empty;
  }
  if (r.authUserGet) return { header: null, roles: store.userGet(r.authUserGet.name) };
  if (r.authUserList) return { header: null, users: store.userList() };
  if (r.authRoleAdd) {
    store.roleAdd(r.authRoleAdd);
    return empty;
  }
  if (r.authRoleDelete) {
    store.roleDelete(r.authRoleDelete);
    return empty;
  }
  if (r.authRoleGet) return { header: null, perm: store.roleGet(r.authRoleGet.role) };
  if (r.authRoleList) return { header: null, roles: store.roleList() };
  if (r.authRoleGrantPermission) {
    store.roleGrantPermission(r.authRoleGrantPermission);
    return empty;
  }
  if (r.authRoleRevokePermission) {
    store.roleRevokePermission(r.authRoleRevokePermission);
    return empty;
  }
  return undefined;
}
