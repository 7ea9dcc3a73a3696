// GENERATED from proto/ by test/unit/pb/render-types.ts; edit that file, not this one.
//
// Plain-object shapes of every wire message, exactly as @grpc/proto-loader decodes them
// with { keepCase: false, longs: String, enums: Number, defaults: true, oneofs: true }:
// - field names camelCased only where the proto name has "_" + lowercase letter
//   (`range_end` -> `rangeEnd`; `ID`, `TTL`, `remaining_TTL`, `member_ID` stay as written);
// - int64/uint64 are decimal strings (lease IDs use all 64 bits: never go through Number);
// - bytes are Buffer, enums numbers (see the const objects below), repeated fields arrays;
// - an unset sub-message is null;
// - a oneof member is present only when set, and the oneof's own name (e.g. `request` on
//   RequestOp) holds the name of the member that is set.
//
// Building messages to send: grpc-js serializes through protobufjs fromObject, which
// treats a missing field as its default and ignores the oneof discriminator, and accepts
// int64 as decimal string or number. Use `MessageInit<T>` for partially filled objects.

/** A message object as built for sending: every field optional, recursively. */
export type MessageInit<T> = T extends Buffer
  ? Buffer
  : T extends (infer E)[]
    ? MessageInit<E>[]
    : T extends object
      ? { [K in keyof T]?: MessageInit<T[K]> | null }
      : T;

// ---- enums (values are the wire numbers) ----

/** mvccpb.Event.EventType */
export const Event_EventType = {
  PUT: 0,
  DELETE: 1,
} as const;
export type Event_EventTypeValue = (typeof Event_EventType)[keyof typeof Event_EventType];

/** authpb.Permission.Type */
export const Permission_Type = {
  READ: 0,
  WRITE: 1,
  READWRITE: 2,
} as const;
export type Permission_TypeValue = (typeof Permission_Type)[keyof typeof Permission_Type];

/** etcdserverpb.RangeRequest.SortOrder */
export const RangeRequest_SortOrder = {
  NONE: 0,
  ASCEND: 1,
  DESCEND: 2,
} as const;
export type RangeRequest_SortOrderValue = (typeof RangeRequest_SortOrder)[keyof typeof RangeRequest_SortOrder];

/** etcdserverpb.RangeRequest.SortTarget */
export const RangeRequest_SortTarget = {
  KEY: 0,
  VERSION: 1,
  CREATE: 2,
  MOD: 3,
  VALUE: 4,
} as const;
export type RangeRequest_SortTargetValue = (typeof RangeRequest_SortTarget)[keyof typeof RangeRequest_SortTarget];

/** etcdserverpb.Compare.CompareResult */
export const Compare_CompareResult = {
  EQUAL: 0,
  GREATER: 1,
  LESS: 2,
  NOT_EQUAL: 3,
} as const;
export type Compare_CompareResultValue = (typeof Compare_CompareResult)[keyof typeof Compare_CompareResult];

/** etcdserverpb.Compare.CompareTarget */
export const Compare_CompareTarget = {
  VERSION: 0,
  CREATE: 1,
  MOD: 2,
  VALUE: 3,
  LEASE: 4,
} as const;
export type Compare_CompareTargetValue = (typeof Compare_CompareTarget)[keyof typeof Compare_CompareTarget];

/** etcdserverpb.WatchCreateRequest.FilterType */
export const WatchCreateRequest_FilterType = {
  NOPUT: 0,
  NODELETE: 1,
} as const;
export type WatchCreateRequest_FilterTypeValue = (typeof WatchCreateRequest_FilterType)[keyof typeof WatchCreateRequest_FilterType];

/** etcdserverpb.AlarmType */
export const AlarmType = {
  NONE: 0,
  NOSPACE: 1,
  CORRUPT: 2,
} as const;
export type AlarmTypeValue = (typeof AlarmType)[keyof typeof AlarmType];

/** etcdserverpb.AlarmRequest.AlarmAction */
export const AlarmRequest_AlarmAction = {
  GET: 0,
  ACTIVATE: 1,
  DEACTIVATE: 2,
} as const;
export type AlarmRequest_AlarmActionValue = (typeof AlarmRequest_AlarmAction)[keyof typeof AlarmRequest_AlarmAction];

/** etcdserverpb.DowngradeRequest.DowngradeAction */
export const DowngradeRequest_DowngradeAction = {
  VALIDATE: 0,
  ENABLE: 1,
  CANCEL: 2,
} as const;
export type DowngradeRequest_DowngradeActionValue = (typeof DowngradeRequest_DowngradeAction)[keyof typeof DowngradeRequest_DowngradeAction];

/** grpc.health.v1.HealthCheckResponse.ServingStatus */
export const HealthCheckResponse_ServingStatus = {
  UNKNOWN: 0,
  SERVING: 1,
  NOT_SERVING: 2,
  SERVICE_UNKNOWN: 3,
} as const;
export type HealthCheckResponse_ServingStatusValue = (typeof HealthCheckResponse_ServingStatus)[keyof typeof HealthCheckResponse_ServingStatus];

/** raftpb.EntryType */
export const EntryType = {
  EntryNormal: 0,
  EntryConfChange: 1,
  EntryConfChangeV2: 2,
} as const;
export type EntryTypeValue = (typeof EntryType)[keyof typeof EntryType];

/** raftpb.MessageType */
export const MessageType = {
  MsgHup: 0,
  MsgBeat: 1,
  MsgProp: 2,
  MsgApp: 3,
  MsgAppResp: 4,
  MsgVote: 5,
  MsgVoteResp: 6,
  MsgSnap: 7,
  MsgHeartbeat: 8,
  MsgHeartbeatResp: 9,
  MsgUnreachable: 10,
  MsgSnapStatus: 11,
  MsgCheckQuorum: 12,
  MsgTransferLeader: 13,
  MsgTimeoutNow: 14,
  MsgReadIndex: 15,
  MsgReadIndexResp: 16,
  MsgPreVote: 17,
  MsgPreVoteResp: 18,
} as const;
export type MessageTypeValue = (typeof MessageType)[keyof typeof MessageType];

/** raftpb.ConfChangeTransition */
export const ConfChangeTransition = {
  ConfChangeTransitionAuto: 0,
  ConfChangeTransitionJointImplicit: 1,
  ConfChangeTransitionJointExplicit: 2,
} as const;
export type ConfChangeTransitionValue = (typeof ConfChangeTransition)[keyof typeof ConfChangeTransition];

/** raftpb.ConfChangeType */
export const ConfChangeType = {
  ConfChangeAddNode: 0,
  ConfChangeRemoveNode: 1,
  ConfChangeUpdateNode: 2,
  ConfChangeAddLearnerNode: 3,
} as const;
export type ConfChangeTypeValue = (typeof ConfChangeType)[keyof typeof ConfChangeType];

// ---- mvccpb ----

/** mvccpb.KeyValue */
export interface KeyValue {
  key: Buffer;
  createRevision: string;
  modRevision: string;
  version: string;
  value: Buffer;
  lease: string;
}

/** mvccpb.Event */
export interface Event {
  type: number;
  kv: KeyValue | null;
  prevKv: KeyValue | null;
}

// ---- authpb ----

/** authpb.UserAddOptions */
export interface UserAddOptions {
  noPassword: boolean;
}

/** authpb.User */
export interface User {
  name: Buffer;
  password: Buffer;
  roles: string[];
  options: UserAddOptions | null;
}

/** authpb.Permission */
export interface Permission {
  permType: number;
  key: Buffer;
  rangeEnd: Buffer;
}

/** authpb.Role */
export interface Role {
  name: Buffer;
  keyPermission: Permission[];
}

// ---- etcdserverpb ----

/** etcdserverpb.ResponseHeader */
export interface ResponseHeader {
  clusterId: string;
  memberId: string;
  revision: string;
  raftTerm: string;
}

/** etcdserverpb.RangeRequest */
export interface RangeRequest {
  key: Buffer;
  rangeEnd: Buffer;
  limit: string;
  revision: string;
  sortOrder: number;
  sortTarget: number;
  serializable: boolean;
  keysOnly: boolean;
  countOnly: boolean;
  minModRevision: string;
  maxModRevision: string;
  minCreateRevision: string;
  maxCreateRevision: string;
}

/** etcdserverpb.RangeResponse */
export interface RangeResponse {
  header: ResponseHeader | null;
  kvs: KeyValue[];
  more: boolean;
  count: string;
}

/** etcdserverpb.PutRequest */
export interface PutRequest {
  key: Buffer;
  value: Buffer;
  lease: string;
  prevKv: boolean;
  ignoreValue: boolean;
  ignoreLease: boolean;
}

/** etcdserverpb.PutResponse */
export interface PutResponse {
  header: ResponseHeader | null;
  prevKv: KeyValue | null;
}

/** etcdserverpb.DeleteRangeRequest */
export interface DeleteRangeRequest {
  key: Buffer;
  rangeEnd: Buffer;
  prevKv: boolean;
}

/** etcdserverpb.DeleteRangeResponse */
export interface DeleteRangeResponse {
  header: ResponseHeader | null;
  deleted: string;
  prevKvs: KeyValue[];
}

/** etcdserverpb.RequestOp */
export interface RequestOp {
  requestRange?: RangeRequest;
  requestPut?: PutRequest;
  requestDeleteRange?: DeleteRangeRequest;
  requestTxn?: TxnRequest;
  /** Which member of oneof `request` is set; absent when none is. */
  request?: 'requestRange' | 'requestPut' | 'requestDeleteRange' | 'requestTxn';
}

/** etcdserverpb.ResponseOp */
export interface ResponseOp {
  responseRange?: RangeResponse;
  responsePut?: PutResponse;
  responseDeleteRange?: DeleteRangeResponse;
  responseTxn?: TxnResponse;
  /** Which member of oneof `response` is set; absent when none is. */
  response?: 'responseRange' | 'responsePut' | 'responseDeleteRange' | 'responseTxn';
}

/** etcdserverpb.Compare */
export interface Compare {
  result: number;
  target: number;
  key: Buffer;
  version?: string;
  createRevision?: string;
  modRevision?: string;
  value?: Buffer;
  lease?: string;
  rangeEnd: Buffer;
  /** Which member of oneof `targetUnion` is set; absent when none is. */
  targetUnion?: 'version' | 'createRevision' | 'modRevision' | 'value' | 'lease';
}

/** etcdserverpb.TxnRequest */
export interface TxnRequest {
  compare: Compare[];
  success: RequestOp[];
  failure: RequestOp[];
}

/** etcdserverpb.TxnResponse */
export interface TxnResponse {
  header: ResponseHeader | null;
  succeeded: boolean;
  responses: ResponseOp[];
}

/** etcdserverpb.CompactionRequest */
export interface CompactionRequest {
  revision: string;
  physical: boolean;
}

/** etcdserverpb.CompactionResponse */
export interface CompactionResponse {
  header: ResponseHeader | null;
}

/** etcdserverpb.HashRequest */
export type HashRequest = Record<string, never>;

/** etcdserverpb.HashKVRequest */
export interface HashKVRequest {
  revision: string;
}

/** etcdserverpb.HashKVResponse */
export interface HashKVResponse {
  header: ResponseHeader | null;
  hash: number;
  compactRevision: string;
  hashRevision: string;
}

/** etcdserverpb.HashResponse */
export interface HashResponse {
  header: ResponseHeader | null;
  hash: number;
}

/** etcdserverpb.SnapshotRequest */
export type SnapshotRequest = Record<string, never>;

/** etcdserverpb.SnapshotResponse */
export interface SnapshotResponse {
  header: ResponseHeader | null;
  remainingBytes: string;
  blob: Buffer;
  version: string;
}

/** etcdserverpb.WatchRequest */
export interface WatchRequest {
  createRequest?: WatchCreateRequest;
  cancelRequest?: WatchCancelRequest;
  progressRequest?: WatchProgressRequest;
  /** Which member of oneof `requestUnion` is set; absent when none is. */
  requestUnion?: 'createRequest' | 'cancelRequest' | 'progressRequest';
}

/** etcdserverpb.WatchCreateRequest */
export interface WatchCreateRequest {
  key: Buffer;
  rangeEnd: Buffer;
  startRevision: string;
  progressNotify: boolean;
  filters: number[];
  prevKv: boolean;
  watchId: string;
  fragment: boolean;
}

/** etcdserverpb.WatchCancelRequest */
export interface WatchCancelRequest {
  watchId: string;
}

/** etcdserverpb.WatchProgressRequest */
export type WatchProgressRequest = Record<string, never>;

/** etcdserverpb.WatchResponse */
export interface WatchResponse {
  header: ResponseHeader | null;
  watchId: string;
  created: boolean;
  canceled: boolean;
  compactRevision: string;
  cancelReason: string;
  fragment: boolean;
  events: Event[];
}

/** etcdserverpb.LeaseGrantRequest */
export interface LeaseGrantRequest {
  TTL: string;
  ID: string;
}

/** etcdserverpb.LeaseGrantResponse */
export interface LeaseGrantResponse {
  header: ResponseHeader | null;
  ID: string;
  TTL: string;
  error: string;
}

/** etcdserverpb.LeaseRevokeRequest */
export interface LeaseRevokeRequest {
  ID: string;
}

/** etcdserverpb.LeaseRevokeResponse */
export interface LeaseRevokeResponse {
  header: ResponseHeader | null;
}

/** etcdserverpb.LeaseCheckpoint */
export interface LeaseCheckpoint {
  ID: string;
  remaining_TTL: string;
}

/** etcdserverpb.LeaseCheckpointRequest */
export interface LeaseCheckpointRequest {
  checkpoints: LeaseCheckpoint[];
}

/** etcdserverpb.LeaseCheckpointResponse */
export interface LeaseCheckpointResponse {
  header: ResponseHeader | null;
}

/** etcdserverpb.LeaseKeepAliveRequest */
export interface LeaseKeepAliveRequest {
  ID: string;
}

/** etcdserverpb.LeaseKeepAliveResponse */
export interface LeaseKeepAliveResponse {
  header: ResponseHeader | null;
  ID: string;
  TTL: string;
}

/** etcdserverpb.LeaseTimeToLiveRequest */
export interface LeaseTimeToLiveRequest {
  ID: string;
  keys: boolean;
}

/** etcdserverpb.LeaseTimeToLiveResponse */
export interface LeaseTimeToLiveResponse {
  header: ResponseHeader | null;
  ID: string;
  TTL: string;
  grantedTTL: string;
  keys: Buffer[];
}

/** etcdserverpb.LeaseLeasesRequest */
export type LeaseLeasesRequest = Record<string, never>;

/** etcdserverpb.LeaseStatus */
export interface LeaseStatus {
  ID: string;
}

/** etcdserverpb.LeaseLeasesResponse */
export interface LeaseLeasesResponse {
  header: ResponseHeader | null;
  leases: LeaseStatus[];
}

/** etcdserverpb.Member */
export interface Member {
  ID: string;
  name: string;
  peerURLs: string[];
  clientURLs: string[];
  isLearner: boolean;
}

/** etcdserverpb.MemberAddRequest */
export interface MemberAddRequest {
  peerURLs: string[];
  isLearner: boolean;
}

/** etcdserverpb.MemberAddResponse */
export interface MemberAddResponse {
  header: ResponseHeader | null;
  member: Member | null;
  members: Member[];
}

/** etcdserverpb.MemberRemoveRequest */
export interface MemberRemoveRequest {
  ID: string;
}

/** etcdserverpb.MemberRemoveResponse */
export interface MemberRemoveResponse {
  header: ResponseHeader | null;
  members: Member[];
}

/** etcdserverpb.MemberUpdateRequest */
export interface MemberUpdateRequest {
  ID: string;
  peerURLs: string[];
}

/** etcdserverpb.MemberUpdateResponse */
export interface MemberUpdateResponse {
  header: ResponseHeader | null;
  members: Member[];
}

/** etcdserverpb.MemberListRequest */
export interface MemberListRequest {
  linearizable: boolean;
}

/** etcdserverpb.MemberListResponse */
export interface MemberListResponse {
  header: ResponseHeader | null;
  members: Member[];
}

/** etcdserverpb.MemberPromoteRequest */
export interface MemberPromoteRequest {
  ID: string;
}

/** etcdserverpb.MemberPromoteResponse */
export interface MemberPromoteResponse {
  header: ResponseHeader | null;
  members: Member[];
}

/** etcdserverpb.DefragmentRequest */
export type DefragmentRequest = Record<string, never>;

/** etcdserverpb.DefragmentResponse */
export interface DefragmentResponse {
  header: ResponseHeader | null;
}

/** etcdserverpb.MoveLeaderRequest */
export interface MoveLeaderRequest {
  targetID: string;
}

/** etcdserverpb.MoveLeaderResponse */
export interface MoveLeaderResponse {
  header: ResponseHeader | null;
}

/** etcdserverpb.AlarmRequest */
export interface AlarmRequest {
  action: number;
  memberID: string;
  alarm: number;
}

/** etcdserverpb.AlarmMember */
export interface AlarmMember {
  memberID: string;
  alarm: number;
}

/** etcdserverpb.AlarmResponse */
export interface AlarmResponse {
  header: ResponseHeader | null;
  alarms: AlarmMember[];
}

/** etcdserverpb.DowngradeRequest */
export interface DowngradeRequest {
  action: number;
  version: string;
}

/** etcdserverpb.DowngradeResponse */
export interface DowngradeResponse {
  header: ResponseHeader | null;
  version: string;
}

/** etcdserverpb.DowngradeVersionTestRequest */
export interface DowngradeVersionTestRequest {
  ver: string;
}

/** etcdserverpb.StatusRequest */
export type StatusRequest = Record<string, never>;

/** etcdserverpb.StatusResponse */
export interface StatusResponse {
  header: ResponseHeader | null;
  version: string;
  dbSize: string;
  leader: string;
  raftIndex: string;
  raftTerm: string;
  raftAppliedIndex: string;
  errors: string[];
  dbSizeInUse: string;
  isLearner: boolean;
  storageVersion: string;
  dbSizeQuota: string;
  downgradeInfo: DowngradeInfo | null;
}

/** etcdserverpb.DowngradeInfo */
export interface DowngradeInfo {
  enabled: boolean;
  targetVersion: string;
}

/** etcdserverpb.AuthEnableRequest */
export type AuthEnableRequest = Record<string, never>;

/** etcdserverpb.AuthDisableRequest */
export type AuthDisableRequest = Record<string, never>;

/** etcdserverpb.AuthStatusRequest */
export type AuthStatusRequest = Record<string, never>;

/** etcdserverpb.AuthenticateRequest */
export interface AuthenticateRequest {
  name: string;
  password: string;
}

/** etcdserverpb.AuthUserAddRequest */
export interface AuthUserAddRequest {
  name: string;
  password: string;
  options: UserAddOptions | null;
  hashedPassword: string;
}

/** etcdserverpb.AuthUserGetRequest */
export interface AuthUserGetRequest {
  name: string;
}

/** etcdserverpb.AuthUserDeleteRequest */
export interface AuthUserDeleteRequest {
  name: string;
}

/** etcdserverpb.AuthUserChangePasswordRequest */
export interface AuthUserChangePasswordRequest {
  name: string;
  password: string;
  hashedPassword: string;
}

/** etcdserverpb.AuthUserGrantRoleRequest */
export interface AuthUserGrantRoleRequest {
  user: string;
  role: string;
}

/** etcdserverpb.AuthUserRevokeRoleRequest */
export interface AuthUserRevokeRoleRequest {
  name: string;
  role: string;
}

/** etcdserverpb.AuthRoleAddRequest */
export interface AuthRoleAddRequest {
  name: string;
}

/** etcdserverpb.AuthRoleGetRequest */
export interface AuthRoleGetRequest {
  role: string;
}

/** etcdserverpb.AuthUserListRequest */
export type AuthUserListRequest = Record<string, never>;

/** etcdserverpb.AuthRoleListRequest */
export type AuthRoleListRequest = Record<string, never>;

/** etcdserverpb.AuthRoleDeleteRequest */
export interface AuthRoleDeleteRequest {
  role: string;
}

/** etcdserverpb.AuthRoleGrantPermissionRequest */
export interface AuthRoleGrantPermissionRequest {
  name: string;
  perm: Permission | null;
}

/** etcdserverpb.AuthRoleRevokePermissionRequest */
export interface AuthRoleRevokePermissionRequest {
  role: string;
  key: Buffer;
  rangeEnd: Buffer;
}

/** etcdserverpb.AuthEnableResponse */
export interface AuthEnableResponse {
  header: ResponseHeader | null;
}

/** etcdserverpb.AuthDisableResponse */
export interface AuthDisableResponse {
  header: ResponseHeader | null;
}

/** etcdserverpb.AuthStatusResponse */
export interface AuthStatusResponse {
  header: ResponseHeader | null;
  enabled: boolean;
  authRevision: string;
}

/** etcdserverpb.AuthenticateResponse */
export interface AuthenticateResponse {
  header: ResponseHeader | null;
  token: string;
}

/** etcdserverpb.AuthUserAddResponse */
export interface AuthUserAddResponse {
  header: ResponseHeader | null;
}

/** etcdserverpb.AuthUserGetResponse */
export interface AuthUserGetResponse {
  header: ResponseHeader | null;
  roles: string[];
}

/** etcdserverpb.AuthUserDeleteResponse */
export interface AuthUserDeleteResponse {
  header: ResponseHeader | null;
}

/** etcdserverpb.AuthUserChangePasswordResponse */
export interface AuthUserChangePasswordResponse {
  header: ResponseHeader | null;
}

/** etcdserverpb.AuthUserGrantRoleResponse */
export interface AuthUserGrantRoleResponse {
  header: ResponseHeader | null;
}

/** etcdserverpb.AuthUserRevokeRoleResponse */
export interface AuthUserRevokeRoleResponse {
  header: ResponseHeader | null;
}

/** etcdserverpb.AuthRoleAddResponse */
export interface AuthRoleAddResponse {
  header: ResponseHeader | null;
}

/** etcdserverpb.AuthRoleGetResponse */
export interface AuthRoleGetResponse {
  header: ResponseHeader | null;
  perm: Permission[];
}

/** etcdserverpb.AuthRoleListResponse */
export interface AuthRoleListResponse {
  header: ResponseHeader | null;
  roles: string[];
}

/** etcdserverpb.AuthUserListResponse */
export interface AuthUserListResponse {
  header: ResponseHeader | null;
  users: string[];
}

/** etcdserverpb.AuthRoleDeleteResponse */
export interface AuthRoleDeleteResponse {
  header: ResponseHeader | null;
}

/** etcdserverpb.AuthRoleGrantPermissionResponse */
export interface AuthRoleGrantPermissionResponse {
  header: ResponseHeader | null;
}

/** etcdserverpb.AuthRoleRevokePermissionResponse */
export interface AuthRoleRevokePermissionResponse {
  header: ResponseHeader | null;
}

/** etcdserverpb.RequestHeader */
export interface RequestHeader {
  ID: string;
  username: string;
  authRevision: string;
}

/** etcdserverpb.InternalRaftRequest */
export interface InternalRaftRequest {
  header: RequestHeader | null;
  ID: string;
  range: RangeRequest | null;
  put: PutRequest | null;
  deleteRange: DeleteRangeRequest | null;
  txn: TxnRequest | null;
  compaction: CompactionRequest | null;
  leaseGrant: LeaseGrantRequest | null;
  leaseRevoke: LeaseRevokeRequest | null;
  alarm: AlarmRequest | null;
  leaseCheckpoint: LeaseCheckpointRequest | null;
  authEnable: AuthEnableRequest | null;
  authDisable: AuthDisableRequest | null;
  authStatus: AuthStatusRequest | null;
  authenticate: InternalAuthenticateRequest | null;
  authUserAdd: AuthUserAddRequest | null;
  authUserDelete: AuthUserDeleteRequest | null;
  authUserGet: AuthUserGetRequest | null;
  authUserChangePassword: AuthUserChangePasswordRequest | null;
  authUserGrantRole: AuthUserGrantRoleRequest | null;
  authUserRevokeRole: AuthUserRevokeRoleRequest | null;
  authUserList: AuthUserListRequest | null;
  authRoleList: AuthRoleListRequest | null;
  authRoleAdd: AuthRoleAddRequest | null;
  authRoleDelete: AuthRoleDeleteRequest | null;
  authRoleGet: AuthRoleGetRequest | null;
  authRoleGrantPermission: AuthRoleGrantPermissionRequest | null;
  authRoleRevokePermission: AuthRoleRevokePermissionRequest | null;
  clusterVersionSet: ClusterVersionSetRequest | null;
  clusterMemberAttrSet: ClusterMemberAttrSetRequest | null;
  downgradeInfoSet: DowngradeInfoSetRequest | null;
}

/** etcdserverpb.EmptyResponse */
export type EmptyResponse = Record<string, never>;

/** etcdserverpb.InternalAuthenticateRequest */
export interface InternalAuthenticateRequest {
  name: string;
  password: string;
  simpleToken: string;
}

// ---- membershippb ----

/** membershippb.RaftAttributes */
export interface RaftAttributes {
  peerUrls: string[];
  isLearner: boolean;
}

/** membershippb.Attributes */
export interface Attributes {
  name: string;
  clientUrls: string[];
}

/** membershippb.Member */
export interface MembershipMember {
  ID: string;
  raftAttributes: RaftAttributes | null;
  memberAttributes: Attributes | null;
}

/** membershippb.ClusterVersionSetRequest */
export interface ClusterVersionSetRequest {
  ver: string;
}

/** membershippb.ClusterMemberAttrSetRequest */
export interface ClusterMemberAttrSetRequest {
  member_ID: string;
  memberAttributes: Attributes | null;
}

/** membershippb.DowngradeInfoSetRequest */
export interface DowngradeInfoSetRequest {
  enabled: boolean;
  ver: string;
}

// ---- v3lockpb ----

/** v3lockpb.LockRequest */
export interface LockRequest {
  name: Buffer;
  lease: string;
}

/** v3lockpb.LockResponse */
export interface LockResponse {
  header: ResponseHeader | null;
  key: Buffer;
}

/** v3lockpb.UnlockRequest */
export interface UnlockRequest {
  key: Buffer;
}

/** v3lockpb.UnlockResponse */
export interface UnlockResponse {
  header: ResponseHeader | null;
}

// ---- v3electionpb ----

/** v3electionpb.CampaignRequest */
export interface CampaignRequest {
  name: Buffer;
  lease: string;
  value: Buffer;
}

/** v3electionpb.CampaignResponse */
export interface CampaignResponse {
  header: ResponseHeader | null;
  leader: LeaderKey | null;
}

/** v3electionpb.LeaderKey */
export interface LeaderKey {
  name: Buffer;
  key: Buffer;
  rev: string;
  lease: string;
}

/** v3electionpb.LeaderRequest */
export interface LeaderRequest {
  name: Buffer;
}

/** v3electionpb.LeaderResponse */
export interface LeaderResponse {
  header: ResponseHeader | null;
  kv: KeyValue | null;
}

/** v3electionpb.ResignRequest */
export interface ResignRequest {
  leader: LeaderKey | null;
}

/** v3electionpb.ResignResponse */
export interface ResignResponse {
  header: ResponseHeader | null;
}

/** v3electionpb.ProclaimRequest */
export interface ProclaimRequest {
  leader: LeaderKey | null;
  value: Buffer;
}

/** v3electionpb.ProclaimResponse */
export interface ProclaimResponse {
  header: ResponseHeader | null;
}

// ---- grpc.health.v1 ----

/** grpc.health.v1.HealthCheckRequest */
export interface HealthCheckRequest {
  service: string;
}

/** grpc.health.v1.HealthCheckResponse */
export interface HealthCheckResponse {
  status: number;
}

// ---- raftpb ----

/** raftpb.Entry */
export interface Entry {
  Term: string;
  Index: string;
  Type: number;
  Data: Buffer;
}

/** raftpb.SnapshotMetadata */
export interface SnapshotMetadata {
  confState: ConfState | null;
  index: string;
  term: string;
}

/** raftpb.Snapshot */
export interface Snapshot {
  data: Buffer;
  metadata: SnapshotMetadata | null;
}

/** raftpb.Message */
export interface Message {
  type: number;
  to: string;
  from: string;
  term: string;
  logTerm: string;
  index: string;
  entries: Entry[];
  commit: string;
  snapshot: Snapshot | null;
  reject: boolean;
  rejectHint: string;
  context: Buffer;
}

/** raftpb.HardState */
export interface HardState {
  term: string;
  vote: string;
  commit: string;
}

/** raftpb.ConfState */
export interface ConfState {
  voters: string[];
  learners: string[];
  votersOutgoing: string[];
  learnersNext: string[];
  autoLeave: boolean;
}

/** raftpb.ConfChange */
export interface ConfChange {
  id: string;
  type: number;
  nodeId: string;
  context: Buffer;
}

/** raftpb.ConfChangeSingle */
export interface ConfChangeSingle {
  type: number;
  nodeId: string;
}

/** raftpb.ConfChangeV2 */
export interface ConfChangeV2 {
  transition: number;
  changes: ConfChangeSingle[];
  context: Buffer;
}

/** Full proto name to TypeScript shape, for typed access by name. */
export interface MessageByName {
  'mvccpb.KeyValue': KeyValue;
  'mvccpb.Event': Event;
  'authpb.UserAddOptions': UserAddOptions;
  'authpb.User': User;
  'authpb.Permission': Permission;
  'authpb.Role': Role;
  'etcdserverpb.ResponseHeader': ResponseHeader;
  'etcdserverpb.RangeRequest': RangeRequest;
  'etcdserverpb.RangeResponse': RangeResponse;
  'etcdserverpb.PutRequest': PutRequest;
  'etcdserverpb.PutResponse': PutResponse;
  'etcdserverpb.DeleteRangeRequest': DeleteRangeRequest;
  'etcdserverpb.DeleteRangeResponse': DeleteRangeResponse;
  'etcdserverpb.RequestOp': RequestOp;
  'etcdserverpb.ResponseOp': ResponseOp;
  'etcdserverpb.Compare': Compare;
  'etcdserverpb.TxnRequest': TxnRequest;
  'etcdserverpb.TxnResponse': TxnResponse;
  'etcdserverpb.CompactionRequest': CompactionRequest;
  'etcdserverpb.CompactionResponse': CompactionResponse;
  'etcdserverpb.HashRequest': HashRequest;
  'etcdserverpb.HashKVRequest': HashKVRequest;
  'etcdserverpb.HashKVResponse': HashKVResponse;
  'etcdserverpb.HashResponse': HashResponse;
  'etcdserverpb.SnapshotRequest': SnapshotRequest;
  'etcdserverpb.SnapshotResponse': SnapshotResponse;
  'etcdserverpb.WatchRequest': WatchRequest;
  'etcdserverpb.WatchCreateRequest': WatchCreateRequest;
  'etcdserverpb.WatchCancelRequest': WatchCancelRequest;
  'etcdserverpb.WatchProgressRequest': WatchProgressRequest;
  'etcdserverpb.WatchResponse': WatchResponse;
  'etcdserverpb.LeaseGrantRequest': LeaseGrantRequest;
  'etcdserverpb.LeaseGrantResponse': LeaseGrantResponse;
  'etcdserverpb.LeaseRevokeRequest': LeaseRevokeRequest;
  'etcdserverpb.LeaseRevokeResponse': LeaseRevokeResponse;
  'etcdserverpb.LeaseCheckpoint': LeaseCheckpoint;
  'etcdserverpb.LeaseCheckpointRequest': LeaseCheckpointRequest;
  'etcdserverpb.LeaseCheckpointResponse': LeaseCheckpointResponse;
  'etcdserverpb.LeaseKeepAliveRequest': LeaseKeepAliveRequest;
  'etcdserverpb.LeaseKeepAliveResponse': LeaseKeepAliveResponse;
  'etcdserverpb.LeaseTimeToLiveRequest': LeaseTimeToLiveRequest;
  'etcdserverpb.LeaseTimeToLiveResponse': LeaseTimeToLiveResponse;
  'etcdserverpb.LeaseLeasesRequest': LeaseLeasesRequest;
  'etcdserverpb.LeaseStatus': LeaseStatus;
  'etcdserverpb.LeaseLeasesResponse': LeaseLeasesResponse;
  'etcdserverpb.Member': Member;
  'etcdserverpb.MemberAddRequest': MemberAddRequest;
  'etcdserverpb.MemberAddResponse': MemberAddResponse;
  'etcdserverpb.MemberRemoveRequest': MemberRemoveRequest;
  'etcdserverpb.MemberRemoveResponse': MemberRemoveResponse;
  'etcdserverpb.MemberUpdateRequest': MemberUpdateRequest;
  'etcdserverpb.MemberUpdateResponse': MemberUpdateResponse;
  'etcdserverpb.MemberListRequest': MemberListRequest;
  'etcdserverpb.MemberListResponse': MemberListResponse;
  'etcdserverpb.MemberPromoteRequest': MemberPromoteRequest;
  'etcdserverpb.MemberPromoteResponse': MemberPromoteResponse;
  'etcdserverpb.DefragmentRequest': DefragmentRequest;
  'etcdserverpb.DefragmentResponse': DefragmentResponse;
  'etcdserverpb.MoveLeaderRequest': MoveLeaderRequest;
  'etcdserverpb.MoveLeaderResponse': MoveLeaderResponse;
  'etcdserverpb.AlarmRequest': AlarmRequest;
  'etcdserverpb.AlarmMember': AlarmMember;
  'etcdserverpb.AlarmResponse': AlarmResponse;
  'etcdserverpb.DowngradeRequest': DowngradeRequest;
  'etcdserverpb.DowngradeResponse': DowngradeResponse;
  'etcdserverpb.DowngradeVersionTestRequest': DowngradeVersionTestRequest;
  'etcdserverpb.StatusRequest': StatusRequest;
  'etcdserverpb.StatusResponse': StatusResponse;
  'etcdserverpb.DowngradeInfo': DowngradeInfo;
  'etcdserverpb.AuthEnableRequest': AuthEnableRequest;
  'etcdserverpb.AuthDisableRequest': AuthDisableRequest;
  'etcdserverpb.AuthStatusRequest': AuthStatusRequest;
  'etcdserverpb.AuthenticateRequest': AuthenticateRequest;
  'etcdserverpb.AuthUserAddRequest': AuthUserAddRequest;
  'etcdserverpb.AuthUserGetRequest': AuthUserGetRequest;
  'etcdserverpb.AuthUserDeleteRequest': AuthUserDeleteRequest;
  'etcdserverpb.AuthUserChangePasswordRequest': AuthUserChangePasswordRequest;
  'etcdserverpb.AuthUserGrantRoleRequest': AuthUserGrantRoleRequest;
  'etcdserverpb.AuthUserRevokeRoleRequest': AuthUserRevokeRoleRequest;
  'etcdserverpb.AuthRoleAddRequest': AuthRoleAddRequest;
  'etcdserverpb.AuthRoleGetRequest': AuthRoleGetRequest;
  'etcdserverpb.AuthUserListRequest': AuthUserListRequest;
  'etcdserverpb.AuthRoleListRequest': AuthRoleListRequest;
  'etcdserverpb.AuthRoleDeleteRequest': AuthRoleDeleteRequest;
  'etcdserverpb.AuthRoleGrantPermissionRequest': AuthRoleGrantPermissionRequest;
  'etcdserverpb.AuthRoleRevokePermissionRequest': AuthRoleRevokePermissionRequest;
  'etcdserverpb.AuthEnableResponse': AuthEnableResponse;
  'etcdserverpb.AuthDisableResponse': AuthDisableResponse;
  'etcdserverpb.AuthStatusResponse': AuthStatusResponse;
  'etcdserverpb.AuthenticateResponse': AuthenticateResponse;
  'etcdserverpb.AuthUserAddResponse': AuthUserAddResponse;
  'etcdserverpb.AuthUserGetResponse': AuthUserGetResponse;
  'etcdserverpb.AuthUserDeleteResponse': AuthUserDeleteResponse;
  'etcdserverpb.AuthUserChangePasswordResponse': AuthUserChangePasswordResponse;
  'etcdserverpb.AuthUserGrantRoleResponse': AuthUserGrantRoleResponse;
  'etcdserverpb.AuthUserRevokeRoleResponse': AuthUserRevokeRoleResponse;
  'etcdserverpb.AuthRoleAddResponse': AuthRoleAddResponse;
  'etcdserverpb.AuthRoleGetResponse': AuthRoleGetResponse;
  'etcdserverpb.AuthRoleListResponse': AuthRoleListResponse;
  'etcdserverpb.AuthUserListResponse': AuthUserListResponse;
  'etcdserverpb.AuthRoleDeleteResponse': AuthRoleDeleteResponse;
  'etcdserverpb.AuthRoleGrantPermissionResponse': AuthRoleGrantPermissionResponse;
  'etcdserverpb.AuthRoleRevokePermissionResponse': AuthRoleRevokePermissionResponse;
  'etcdserverpb.RequestHeader': RequestHeader;
  'etcdserverpb.InternalRaftRequest': InternalRaftRequest;
  'etcdserverpb.EmptyResponse': EmptyResponse;
  'etcdserverpb.InternalAuthenticateRequest': InternalAuthenticateRequest;
  'membershippb.RaftAttributes': RaftAttributes;
  'membershippb.Attributes': Attributes;
  'membershippb.Member': MembershipMember;
  'membershippb.ClusterVersionSetRequest': ClusterVersionSetRequest;
  'membershippb.ClusterMemberAttrSetRequest': ClusterMemberAttrSetRequest;
  'membershippb.DowngradeInfoSetRequest': DowngradeInfoSetRequest;
  'v3lockpb.LockRequest': LockRequest;
  'v3lockpb.LockResponse': LockResponse;
  'v3lockpb.UnlockRequest': UnlockRequest;
  'v3lockpb.UnlockResponse': UnlockResponse;
  'v3electionpb.CampaignRequest': CampaignRequest;
  'v3electionpb.CampaignResponse': CampaignResponse;
  'v3electionpb.LeaderKey': LeaderKey;
  'v3electionpb.LeaderRequest': LeaderRequest;
  'v3electionpb.LeaderResponse': LeaderResponse;
  'v3electionpb.ResignRequest': ResignRequest;
  'v3electionpb.ResignResponse': ResignResponse;
  'v3electionpb.ProclaimRequest': ProclaimRequest;
  'v3electionpb.ProclaimResponse': ProclaimResponse;
  'grpc.health.v1.HealthCheckRequest': HealthCheckRequest;
  'grpc.health.v1.HealthCheckResponse': HealthCheckResponse;
  'raftpb.Entry': Entry;
  'raftpb.SnapshotMetadata': SnapshotMetadata;
  'raftpb.Snapshot': Snapshot;
  'raftpb.Message': Message;
  'raftpb.HardState': HardState;
  'raftpb.ConfState': ConfState;
  'raftpb.ConfChange': ConfChange;
  'raftpb.ConfChangeSingle': ConfChangeSingle;
  'raftpb.ConfChangeV2': ConfChangeV2;
}
export type MessageName = keyof MessageByName;
