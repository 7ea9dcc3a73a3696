// The facade the API adapters (src/api) call. Every method answers with a complete
// response message (header filled: cluster_id, member_id, revision, raft_term) or throws an
// EtcdError from src/errors. Request/response shapes are the plain objects of src/pb/types
// (proto-loader conventions: camelCase fields, int64/uint64 as decimal strings, bytes as
// Buffer, enums as numbers, unset sub-messages as null).
import type * as pb from '../pb/types';
import type { WatchSink, WatchStream } from '../watch/types';

export interface ClientUrlsInfo {
  name: string;
  memberId: bigint;
  clusterId: bigint;
}

export interface EtcdServerApi {
  // KV
  range(req: pb.RangeRequest): Promise<pb.RangeResponse>;
  put(req: pb.PutRequest): Promise<pb.PutResponse>;
  deleteRange(req: pb.DeleteRangeRequest): Promise<pb.DeleteRangeResponse>;
  txn(req: pb.TxnRequest): Promise<pb.TxnResponse>;
  compact(req: pb.CompactionRequest): Promise<pb.CompactionResponse>;

  // Watch: one WatchStream per gRPC Watch call.
  openWatchStream(sink: WatchSink): WatchStream;

  // Lease
  leaseGrant(req: pb.LeaseGrantRequest): Promise<pb.LeaseGrantResponse>;
  leaseRevoke(req: pb.LeaseRevokeRequest): Promise<pb.LeaseRevokeResponse>;
  /** One keepalive; resolves with the TTL granted (0 and ID echo for an unknown lease). */
  leaseKeepAlive(req: pb.LeaseKeepAliveRequest): Promise<pb.LeaseKeepAliveResponse>;
  leaseTimeToLive(req: pb.LeaseTimeToLiveRequest): Promise<pb.LeaseTimeToLiveResponse>;
  leaseLeases(req: pb.LeaseLeasesRequest): Promise<pb.LeaseLeasesResponse>;

  // Cluster
  memberList(req: pb.MemberListRequest): Promise<pb.MemberListResponse>;
  memberAdd(req: pb.MemberAddRequest): Promise<pb.MemberAddResponse>;
  memberRemove(req: pb.MemberRemoveRequest): Promise<pb.MemberRemoveResponse>;
  memberUpdate(req: pb.MemberUpdateRequest): Promise<pb.MemberUpdateResponse>;
  memberPromote(req: pb.MemberPromoteRequest): Promise<pb.MemberPromoteResponse>;

  // Maintenance
  status(req: pb.StatusRequest): Promise<pb.StatusResponse>;
  alarm(req: pb.AlarmRequest): Promise<pb.AlarmResponse>;
  defragment(req: pb.DefragmentRequest): Promise<pb.DefragmentResponse>;
  hash(req: pb.HashRequest): Promise<pb.HashResponse>;
  hashKV(req: pb.HashKVRequest): Promise<pb.HashKVResponse>;
  /** A consistent copy of the backend database, streamed in chunks; see src/backend. */
  snapshot(): AsyncIterable<pb.SnapshotResponse>;
  moveLeader(req: pb.MoveLeaderRequest): Promise<pb.MoveLeaderResponse>;

  // Auth (only AuthStatus is real until the auth issue; others answer etcd's errors)
  authStatus(req: pb.AuthStatusRequest): Promise<pb.AuthStatusResponse>;

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
