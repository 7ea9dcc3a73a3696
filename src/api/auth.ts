// etcdserverpb.Auth. Only AuthStatus is real until the auth store lands. The other answers
// are what etcd returns while auth has never been enabled (no users exist): Authenticate
// fails with AuthNotEnabled, AuthDisable succeeds, AuthEnable finds no root user. User and
// role management (which etcd allows with auth disabled) is Unimplemented for now.
import * as grpc from '@grpc/grpc-js';
import type * as pb from '../pb/types';
import { etcdError } from '../errors';
import type { EtcdServerApi } from '../server/types';
import { unary, unimplemented } from './unary';

const USER_ROLE_RPCS = [
  'UserAdd',
  'UserGet',
  'UserList',
  'UserDelete',
  'UserChangePassword',
  'UserGrantRole',
  'UserRevokeRole',
  'RoleAdd',
  'RoleGet',
  'RoleList',
  'RoleDelete',
  'RoleGrantPermission',
  'RoleRevokePermission',
] as const;

export function authService(server: EtcdServerApi): grpc.UntypedServiceImplementation {
  const impl: grpc.UntypedServiceImplementation = {
    AuthStatus: unary<pb.AuthStatusRequest, pb.AuthStatusResponse>(async (req) => server.authStatus(req)),
    Authenticate: unary<pb.AuthenticateRequest, pb.AuthenticateResponse>(async () => {
      throw etcdError('AuthNotEnabled');
    }),
    AuthEnable: unary<pb.AuthEnableRequest, pb.AuthEnableResponse>(async () => {
      throw etcdError('RootUserNotExist');
    }),
    AuthDisable: unary<pb.AuthDisableRequest, pb.AuthDisableResponse>(async () => {
      return { header: server.header() } as pb.AuthDisableResponse;
    }),
  };
  for (const name of USER_ROLE_RPCS) impl[name] = unimplemented(name);
  return impl;
}
