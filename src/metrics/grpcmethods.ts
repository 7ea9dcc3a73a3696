// The gRPC methods whose metrics etcd pre-creates at zero for every (method, code) when it
// starts (go-grpc-prometheus's Register). Election and Lock are registered after that call,
// so their series only appear once used.

export type GrpcType = 'unary' | 'client_stream' | 'server_stream' | 'bidi_stream';

export interface GrpcMethodInfo {
  readonly service: string;
  readonly method: string;
  readonly type: GrpcType;
}

function unary(service: string, ...methods: string[]): GrpcMethodInfo[] {
  return methods.map((method) => ({ service, method, type: 'unary' }));
}

export const ETCD_GRPC_METHODS: readonly GrpcMethodInfo[] = [
  ...unary('etcdserverpb.KV', 'Range', 'Put', 'DeleteRange', 'Txn', 'Compact'),
  { service: 'etcdserverpb.Watch', method: 'Watch', type: 'bidi_stream' },
  ...unary('etcdserverpb.Lease', 'LeaseGrant', 'LeaseRevoke'),
  { service: 'etcdserverpb.Lease', method: 'LeaseKeepAlive', type: 'bidi_stream' },
  ...unary('etcdserverpb.Lease', 'LeaseTimeToLive', 'LeaseLeases'),
  ...unary('etcdserverpb.Cluster', 'MemberAdd', 'MemberRemove', 'MemberUpdate', 'MemberList', 'MemberPromote'),
  ...unary('etcdserverpb.Maintenance', 'Alarm', 'Status', 'Defragment', 'Hash', 'HashKV'),
  { service: 'etcdserverpb.Maintenance', method: 'Snapshot', type: 'server_stream' },
  ...unary('etcdserverpb.Maintenance', 'MoveLeader', 'Downgrade'),
  ...unary(
    'etcdserverpb.Auth',
    'AuthEnable',
    'AuthDisable',
    'AuthStatus',
    'Authenticate',
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
  ),
  ...unary('grpc.health.v1.Health', 'Check'),
  { service: 'grpc.health.v1.Health', method: 'Watch', type: 'server_stream' },
];

/** gRPC status code names as Go's codes.Code.String() prints them (the grpc_code label). */
export const GRPC_CODE_NAMES: readonly string[] = [
  'OK',
  'Canceled',
  'Unknown',
  'InvalidArgument',
  'DeadlineExceeded',
  'NotFound',
  'AlreadyExists',
  'PermissionDenied',
  'ResourceExhausted',
  'FailedPrecondition',
  'Aborted',
  'OutOfRange',
  'Unimplemented',
  'Internal',
  'Unavailable',
  'DataLoss',
  'Unauthenticated',
];

export function grpcCodeName(code: number): string {
  return GRPC_CODE_NAMES[code] ?? `Code(${code})`;
}
