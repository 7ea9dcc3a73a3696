// etcdserverpb.Auth, and how every adapter finds the caller on a call (callAuth).
import * as grpc from '@grpc/grpc-js';
import type * as pb from '../pb/types';
import type { CallAuth, EtcdServerApi } from '../server/types';
import { etcdError } from '../errors';
import { unary, unimplemented } from './unary';
import { metadataValues, type MetadataCarrier } from './call_metadata';

interface CallWithMetadata extends MetadataCarrier {
  getAuthContext?: () => { sslPeerCertificate?: { subject?: { CN?: string | string[] } } };
}

/** etcd's AuthInfoFromCtx inputs: the `token` (or gateway `authorization`) metadata and the TLS client CN. */
export function callAuth(call: CallWithMetadata): CallAuth {
  const out: CallAuth = {};
  const tok = metadataValues(call, 'token')[0] ?? metadataValues(call, 'authorization')[0];
  // etcd 3.6 takes "Bearer <token>" as the token (strings.TrimPrefix), in either metadata.
  if (tok !== undefined) out.token = (typeof tok === 'string' ? tok : tok.toString('utf8')).replace(/^Bearer /, '');
  try {
    const cn = call.getAuthContext?.().sslPeerCertificate?.subject?.CN;
    if (typeof cn === 'string' && cn !== '') out.commonName = cn;
    else if (Array.isArray(cn) && typeof cn[0] === 'string') out.commonName = cn[0];
  } catch {
    // Calls on sockets that are gone have no auth context; they carry no CN then.
  }
  return out;
}

export function authService(server: EtcdServerApi): grpc.UntypedServiceImplementation {
  const impl: grpc.UntypedServiceImplementation = {
    AuthStatus: unary<pb.AuthStatusRequest, pb.AuthStatusResponse>(async (req) => server.authStatus(req)),
  };
  const a = server.auth;
  if (!a) {
    // A server without an auth store (test fakes) answers as etcd does before any user exists.
    impl['Authenticate'] = unary<pb.AuthenticateRequest, pb.AuthenticateResponse>(async () => {
      throw etcdError('AuthNotEnabled');
    });
    impl['AuthEnable'] = unary<pb.AuthEnableRequest, pb.AuthEnableResponse>(async () => {
      throw etcdError('RootUserNotExist');
    });
    impl['AuthDisable'] = unary<pb.AuthDisableRequest, pb.AuthDisableResponse>(async () => ({ header: server.header() }));
    for (const name of ['UserAdd', 'UserGet', 'UserList', 'UserDelete', 'UserChangePassword', 'UserGrantRole', 'UserRevokeRole', 'RoleAdd', 'RoleGet', 'RoleList', 'RoleDelete', 'RoleGrantPermission', 'RoleRevokePermission']) {
      impl[name] = unimplemented(name);
    }
    return impl;
  }
  return {
    ...impl,
    Authenticate: unary<pb.AuthenticateRequest, pb.AuthenticateResponse>(async (req, call) => a.authenticate(req, callAuth(call))),
    AuthEnable: unary<pb.AuthEnableRequest, pb.AuthEnableResponse>(async (req, call) => a.authEnable(req, callAuth(call))),
    AuthDisable: unary<pb.AuthDisableRequest, pb.AuthDisableResponse>(async (req, call) => a.authDisable(req, callAuth(call))),
    UserAdd: unary<pb.AuthUserAddRequest, pb.AuthUserAddResponse>(async (req, call) => a.userAdd(req, callAuth(call))),
    UserGet: unary<pb.AuthUserGetRequest, pb.AuthUserGetResponse>(async (req, call) => a.userGet(req, callAuth(call))),
    UserList: unary<pb.AuthUserListRequest, pb.AuthUserListResponse>(async (req, call) => a.userList(req, callAuth(call))),
    UserDelete: unary<pb.AuthUserDeleteRequest, pb.AuthUserDeleteResponse>(async (req, call) => a.userDelete(req, callAuth(call))),
    UserChangePassword: unary<pb.AuthUserChangePasswordRequest, pb.AuthUserChangePasswordResponse>(async (req, call) =>
      a.userChangePassword(req, callAuth(call)),
    ),
    UserGrantRole: unary<pb.AuthUserGrantRoleRequest, pb.AuthUserGrantRoleResponse>(async (req, call) => a.userGrantRole(req, callAuth(call))),
    UserRevokeRole: unary<pb.AuthUserRevokeRoleRequest, pb.AuthUserRevokeRoleResponse>(async (req, call) => a.userRevokeRole(req, callAuth(call))),
    RoleAdd: unary<pb.AuthRoleAddRequest, pb.AuthRoleAddResponse>(async (req, call) => a.roleAdd(req, callAuth(call))),
    RoleGet: unary<pb.AuthRoleGetRequest, pb.AuthRoleGetResponse>(async (req, call) => a.roleGet(req, callAuth(call))),
    RoleList: unary<pb.AuthRoleListRequest, pb.AuthRoleListResponse>(async (req, call) => a.roleList(req, callAuth(call))),
    RoleDelete: unary<pb.AuthRoleDeleteRequest, pb.AuthRoleDeleteResponse>(async (req, call) => a.roleDelete(req, callAuth(call))),
    RoleGrantPermission: unary<pb.AuthRoleGrantPermissionRequest, pb.AuthRoleGrantPermissionResponse>(async (req, call) =>
      a.roleGrantPermission(req, callAuth(call)),
    ),
    RoleRevokePermission: unary<pb.AuthRoleRevokePermissionRequest, pb.AuthRoleRevokePermissionResponse>(async (req, call) =>
      a.roleRevokePermission(req, callAuth(call)),
    ),
  };
}
