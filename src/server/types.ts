// The facade the API adapters (src/api) call. Every method answers with a complete
// response message (header filled: cluster_id, member_id, revision, raft_term) or throws an
// EtcdError from src/errors. Request/response shapes are the plain objects of src/pb/types
// (proto-loader conventions: camelCase fields, int64/uint64 as decimal strings, bytes as
// Buffer, enums as numbers, unset sub-messages as null).
import type { EtcdError } from '../errors';
import type * as pb from '../pb/types';
import type { WatchSink, WatchStream } from '../watch/types';

/**
 * Who is calling, as the API adapters find it on the call: the token from gRPC metadata
 * (`token`, or `authorization` from the JSON gateway) and, with --client-cert-auth, the CN of
 * the verified client certificate (etcd's AuthInfoFromTLS).
 */
export interface CallAuth {
  token?: string;
  commonName?: string;
}

/** etcdserverpb.Auth (every method checks the caller like etcd: admin ops need the root role). */
export interface AuthApi {
  authenticate(req: pb.AuthenticateRequest, ctx?: CallAuth): Promise<pb.AuthenticateResponse>;
  authEnable(req: pb.AuthEnableRequest, ctx?: CallAuth): Promise<pb.AuthEnableResponse>;
  authDisable(req: pb.AuthDisableRequest, ctx?: CallAuth): Promise<pb.AuthDisableResponse>;
  userAdd(req: pb.AuthUserAddRequest, ctx?: CallAuth): Promise<pb.AuthUserAddResponse>;
  userGet(req: pb.AuthUserGetRequest, ctx?: CallAuth): Promise<pb.AuthUserGetResponse>;
  userList(req: pb.AuthUserListRequest, ctx?: CallAuth): Promise<pb.AuthUserListResponse>;
  userDelete(req: pb.AuthUserDeleteRequest, ctx?: CallAuth): Promise<pb.AuthUserDeleteResponse>;
  userChangePassword(req: pb.AuthUserChangePasswordRequest, ctx?: CallAuth): Promise<pb.AuthUserChangePasswordResponse>;
  userGrantRole(req: pb.AuthUserGrantRoleRequest, ctx?: CallAuth): Promise<pb.AuthUserGrantRoleResponse>;
  userRevokeRole(req: pb.AuthUserRevokeRoleRequest, ctx?: CallAuth): Promise<pb.AuthUserRevokeRoleResponse>;
  roleAdd(req: pb.AuthRoleAddRequest, ctx?: CallAuth): Promise<pb.AuthRoleAddResponse>;
  roleGet(req: pb.AuthRoleGetRequest, ctx?: CallAuth): Promise<pb.AuthRoleGetResponse>;
  roleList(req: pb.AuthRoleListRequest, ctx?: CallAuth): Promise<pb.AuthRoleListResponse>;
  roleDelete(req: pb.AuthRoleDeleteRequest, ctx?: CallAuth): Promise<pb.AuthRoleDeleteResponse>;
  roleGrantPermission(req: pb.AuthRoleGrantPermissionRequest, ctx?: CallAuth): Promise<pb.AuthRoleGrantPermissionResponse>;
  roleRevokePermission(req: pb.AuthRoleRevokePermissionRequest, ctx?: CallAuth): Promise<pb.AuthRoleRevokePermissionResponse>;
  /**
   * Why a watch on [key, rangeEnd) may not be created (etcd's isWatchPermitted: an invalid
   * token, no user, a stale auth revision or no read permission), or undefined if it may.
   * Never throws.
   */
  watchRefusal(ctx: CallAuth | undefined, key: Buffer, rangeEnd: Buffer): EtcdError | undefined;
  /**
   * etcd 3.6's requireAuthInfo, for calls any user may make: with auth on, throws unless the
   * caller is someone (a token that resolves, or a TLS CN).
   */
  requireUser(ctx: CallAuth | undefined): void;
  /** etcd's isPermitted: throws unless the caller has the root role (auth off: anyone). */
  checkAdmin(ctx: CallAuth | undefined): void;
}

export interface EtcdServerApi {
  // KV (ctx: the caller, for permission checks once auth is enabled)
  /**
   * `forWire`: the response is only encoded, once (the KV service): its keys may then be kept as
   * their stored bytes, whose fields are accessors rather than own properties, and a large one's
   * bytes go back to the buffer pool once encoded or written (applyRangeForWire, WireRecords).
   */
  range(req: pb.RangeRequest, ctx?: CallAuth, forWire?: boolean): Promise<pb.RangeResponse>;
  put(req: pb.PutRequest, ctx?: CallAuth): Promise<pb.PutResponse>;
  deleteRange(req: pb.DeleteRangeRequest, ctx?: CallAuth): Promise<pb.DeleteRangeResponse>;
  txn(req: pb.TxnRequest, ctx?: CallAuth): Promise<pb.TxnResponse>;
  compact(req: pb.CompactionRequest, ctx?: CallAuth): Promise<pb.CompactionResponse>;

  // Watch: one WatchStream per gRPC Watch call.
  openWatchStream(sink: WatchSink): WatchStream;

  // Lease
  leaseGrant(req: pb.LeaseGrantRequest, ctx?: CallAuth): Promise<pb.LeaseGrantResponse>;
  leaseRevoke(req: pb.LeaseRevokeRequest, ctx?: CallAuth): Promise<pb.LeaseRevokeResponse>;
  /** One keepalive; resolves with the TTL granted (0 and ID echo for an unknown lease). */
  leaseKeepAlive(req: pb.LeaseKeepAliveRequest, ctx?: CallAuth): Promise<pb.LeaseKeepAliveResponse>;
  leaseTimeToLive(req: pb.LeaseTimeToLiveRequest, ctx?: CallAuth): Promise<pb.LeaseTimeToLiveResponse>;
  leaseLeases(req: pb.LeaseLeasesRequest, ctx?: CallAuth): Promise<pb.LeaseLeasesResponse>;

  // Cluster
  memberList(req: pb.MemberListRequest): Promise<pb.MemberListResponse>;
  memberAdd(req: pb.MemberAddRequest, ctx?: CallAuth): Promise<pb.MemberAddResponse>;
  memberRemove(req: pb.MemberRemoveRequest, ctx?: CallAuth): Promise<pb.MemberRemoveResponse>;
  memberUpdate(req: pb.MemberUpdateRequest, ctx?: CallAuth): Promise<pb.MemberUpdateResponse>;
  memberPromote(req: pb.MemberPromoteRequest, ctx?: CallAuth): Promise<pb.MemberPromoteResponse>;

  // Maintenance
  status(req: pb.StatusRequest): Promise<pb.StatusResponse>;
  /** What etcd's interceptors check on every call: is there a leader, is this member a learner. Cheap. */
  memberState(): { hasLeader: boolean; isLearner: boolean };
  alarm(req: pb.AlarmRequest, ctx?: CallAuth): Promise<pb.AlarmResponse>;
  defragment(req: pb.DefragmentRequest, ctx?: CallAuth): Promise<pb.DefragmentResponse>;
  hash(req: pb.HashRequest, ctx?: CallAuth): Promise<pb.HashResponse>;
  hashKV(req: pb.HashKVRequest, ctx?: CallAuth): Promise<pb.HashKVResponse>;
  /** A consistent copy of the backend database, streamed in chunks; see src/backend. */
  snapshot(ctx?: CallAuth): AsyncIterable<pb.SnapshotResponse>;
  moveLeader(req: pb.MoveLeaderRequest, ctx?: CallAuth): Promise<pb.MoveLeaderResponse>;

  // Auth
  authStatus(req: pb.AuthStatusRequest): Promise<pb.AuthStatusResponse>;
  /** The rest of etcdserverpb.Auth; absent in test fakes (the adapter answers Unimplemented). */
  readonly auth?: AuthApi;

  // For HTTP /health, /readyz, /livez and /version.
  health(opts: { serializable: boolean; exclude: string[] }): Promise<{ ok: boolean; reason: string }>;
  versions(): { etcdserver: string; etcdcluster: string };

  /**
   * A response header (cluster_id, member_id, raft_term filled) at `revision`, or at the
   * store's current revision when omitted. For responses the API layer builds itself
   * (watch responses, keepalive answers for unknown leases, rejected watch creates).
   */
  header(revision?: number): pb.ResponseHeader;

  /** Limits the adapters enforce before a request reaches the server. */
  readonly limits: { maxRequestBytes: number; maxTxnOps: number };
}
