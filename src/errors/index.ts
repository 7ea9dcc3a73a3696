// etcd's client-visible errors. Clients match the message text byte for byte (the Go
// client rebuilds typed errors from it) and retry according to the gRPC status code, so
// both must stay exactly as etcd has them.

/** gRPC status codes (numeric values are part of the gRPC wire protocol). */
export const Code = {
  OK: 0,
  Canceled: 1,
  Unknown: 2,
  InvalidArgument: 3,
  DeadlineExceeded: 4,
  NotFound: 5,
  AlreadyExists: 6,
  PermissionDenied: 7,
  ResourceExhausted: 8,
  FailedPrecondition: 9,
  Aborted: 10,
  OutOfRange: 11,
  Unimplemented: 12,
  Internal: 13,
  Unavailable: 14,
  DataLoss: 15,
  Unauthenticated: 16,
} as const;
export type CodeValue = (typeof Code)[keyof typeof Code];

/** An error a client sees: a gRPC status code and etcd's exact message. */
export class EtcdError extends Error {
  constructor(
    readonly code: CodeValue,
    message: string,
  ) {
    super(message);
    this.name = 'EtcdError';
  }
  /** grpc-js reads `code` and `details` from a thrown/callback error object. */
  get details(): string {
    return this.message;
  }
}

interface ErrorDef {
  readonly code: CodeValue;
  readonly message: string;
}
function def(code: CodeValue, message: string): ErrorDef {
  return { code, message };
}

/** Every etcd v3 error, keyed by etcd's Go name without the ErrGRPC prefix. */
export const Errors = {
  EmptyKey: def(Code.InvalidArgument, "etcdserver: key is not provided"),
  KeyNotFound: def(Code.InvalidArgument, "etcdserver: key not found"),
  ValueProvided: def(Code.InvalidArgument, "etcdserver: value is provided"),
  LeaseProvided: def(Code.InvalidArgument, "etcdserver: lease is provided"),
  TooManyOps: def(Code.InvalidArgument, "etcdserver: too many operations in txn request"),
  DuplicateKey: def(Code.InvalidArgument, "etcdserver: duplicate key given in txn request"),
  Compacted: def(Code.OutOfRange, "etcdserver: mvcc: required revision has been compacted"),
  FutureRev: def(Code.OutOfRange, "etcdserver: mvcc: required revision is a future revision"),
  NoSpace: def(Code.ResourceExhausted, "etcdserver: mvcc: database space exceeded"),
  LeaseNotFound: def(Code.NotFound, "etcdserver: requested lease not found"),
  LeaseExist: def(Code.FailedPrecondition, "etcdserver: lease already exists"),
  LeaseTTLTooLarge: def(Code.OutOfRange, "etcdserver: too large lease TTL"),
  WatchCanceled: def(Code.Canceled, "etcdserver: watch canceled"),
  MemberExist: def(Code.FailedPrecondition, "etcdserver: member ID already exist"),
  PeerURLExist: def(Code.FailedPrecondition, "etcdserver: Peer URLs already exists"),
  MemberNotEnoughStarted: def(Code.FailedPrecondition, "etcdserver: re-configuration failed due to not enough started members"),
  MemberBadURLs: def(Code.InvalidArgument, "etcdserver: given member URLs are invalid"),
  MemberNotFound: def(Code.NotFound, "etcdserver: member not found"),
  MemberNotLearner: def(Code.FailedPrecondition, "etcdserver: can only promote a learner member"),
  LearnerNotReady: def(Code.FailedPrecondition, "etcdserver: can only promote a learner member which is in sync with leader"),
  TooManyLearners: def(Code.FailedPrecondition, "etcdserver: too many learner members in cluster"),
  RequestTooLarge: def(Code.InvalidArgument, "etcdserver: request is too large"),
  RequestTooManyRequests: def(Code.ResourceExhausted, "etcdserver: too many requests"),
  RootUserNotExist: def(Code.FailedPrecondition, "etcdserver: root user does not exist"),
  RootRoleNotExist: def(Code.FailedPrecondition, "etcdserver: root user does not have root role"),
  UserAlreadyExist: def(Code.FailedPrecondition, "etcdserver: user name already exists"),
  UserEmpty: def(Code.InvalidArgument, "etcdserver: user name is empty"),
  UserNotFound: def(Code.FailedPrecondition, "etcdserver: user name not found"),
  RoleAlreadyExist: def(Code.FailedPrecondition, "etcdserver: role name already exists"),
  RoleNotFound: def(Code.FailedPrecondition, "etcdserver: role name not found"),
  RoleEmpty: def(Code.InvalidArgument, "etcdserver: role name is empty"),
  AuthFailed: def(Code.InvalidArgument, "etcdserver: authentication failed, invalid user ID or password"),
  // etcd's auth.ErrNoPasswordUser has no gRPC error of its own: togRPCError sends it as Unknown
  // with the auth package's text (3.4 through 3.6).
  NoPasswordUser: def(Code.Unknown, "auth: authentication failed, password was given for no password user"),
  // etcd 3.5+: a RoleGrantPermission without a permission.
  PermissionNotGiven: def(Code.InvalidArgument, "etcdserver: permission not given"),
  PermissionDenied: def(Code.PermissionDenied, "etcdserver: permission denied"),
  RoleNotGranted: def(Code.FailedPrecondition, "etcdserver: role is not granted to the user"),
  PermissionNotGranted: def(Code.FailedPrecondition, "etcdserver: permission is not granted to the role"),
  AuthNotEnabled: def(Code.FailedPrecondition, "etcdserver: authentication is not enabled"),
  InvalidAuthToken: def(Code.Unauthenticated, "etcdserver: invalid auth token"),
  InvalidAuthMgmt: def(Code.InvalidArgument, "etcdserver: invalid auth management"),
  AuthOldRevision: def(Code.InvalidArgument, "etcdserver: revision of auth store is old"),
  NoLeader: def(Code.Unavailable, "etcdserver: no leader"),
  NotLeader: def(Code.FailedPrecondition, "etcdserver: not leader"),
  LeaderChanged: def(Code.Unavailable, "etcdserver: leader changed"),
  NotCapable: def(Code.Unavailable, "etcdserver: not capable"),
  Stopped: def(Code.Unavailable, "etcdserver: server stopped"),
  Timeout: def(Code.Unavailable, "etcdserver: request timed out"),
  TimeoutDueToLeaderFail: def(Code.Unavailable, "etcdserver: request timed out, possibly due to previous leader failure"),
  TimeoutDueToConnectionLost: def(Code.Unavailable, "etcdserver: request timed out, possibly due to connection lost"),
  TimeoutWaitAppliedIndex: def(Code.Unavailable, "etcdserver: request timed out, waiting for the applied index took too long"),
  Unhealthy: def(Code.Unavailable, "etcdserver: unhealthy cluster"),
  Corrupt: def(Code.DataLoss, "etcdserver: corrupt cluster"),
  NotSupportedForLearner: def(Code.Unavailable, "etcdserver: rpc not supported for learner"),
  BadLeaderTransferee: def(Code.FailedPrecondition, "etcdserver: bad leader transferee"),  // Added after etcd 3.4; texts as etcd 3.5/3.6 send them.
  ClusterIdMismatch: def(Code.FailedPrecondition, "etcdserver: cluster ID mismatch"),
  // Go's context.DeadlineExceeded, which etcd passes on untranslated: a proposal that waited its
  // whole request timeout for a leader (raft's node holds it until one is known). etcd 3.4's
  // grpc-go sends a non-status error as Unknown (measured against 3.4.23).
  ContextDeadlineExceeded: def(Code.Unknown, "context deadline exceeded"),
} as const satisfies Record<string, ErrorDef>;

export type ErrorName = keyof typeof Errors;

/** Make a throwable error for one of etcd's named errors. */
export function etcdError(name: ErrorName): EtcdError {
  const d = Errors[name];
  return new EtcdError(d.code, d.message);
}

export function isEtcdError(e: unknown): e is EtcdError {
  return e instanceof EtcdError;
}
