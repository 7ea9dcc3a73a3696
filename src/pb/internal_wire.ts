// The raft entry payload (etcdserverpb.InternalRaftRequest) by hand for the requests that make
// up nearly every entry: header + range / put / delete_range / txn / compaction. Any other
// request answers null and goes through protobufjs (src/pb/internal.ts).
import {
  compactionRequestSize,
  decodeCompactionRequestAt,
  decodeDeleteRangeRequestAt,
  decodePutRequestAt,
  decodeRangeRequestAt,
  decodeRequestHeaderAt,
  decodeTxnRequestAt,
  deleteRangeRequestSize,
  int64FieldSize,
  putRequestSize,
  rangeRequestSize,
  requestHeaderSize,
  subSize,
  txnRequestSize,
  writeCompactionRequest,
  writeDeleteRangeRequest,
  writeInt64Field,
  writePutRequest,
  writeRangeRequest,
  writeRequestHeader,
  writeSub,
  writeTxnRequest,
} from './kv_wire';
import type { InternalRaftRequest } from './types';
import { Reader, WIRE_DELIMITED, WIRE_VARINT, Writer } from './wire';

type Obj = Record<string, unknown>;

/**
 * Whether the request sets a field the fast path does not write (protobufjs does). Named
 * reads, not a loop of req[name]: keyed reads of absent properties were the slowest part of
 * the whole encoder.
 */
function hasOtherField(r: Obj): boolean {
  return (
    r.leaseGrant != null ||
    r.leaseRevoke != null ||
    r.alarm != null ||
    r.leaseCheckpoint != null ||
    r.authEnable != null ||
    r.authDisable != null ||
    r.authenticate != null ||
    r.authStatus != null ||
    r.authUserAdd != null ||
    r.authUserDelete != null ||
    r.authUserGet != null ||
    r.authUserChangePassword != null ||
    r.authUserGrantRole != null ||
    r.authUserRevokeRole != null ||
    r.authUserList != null ||
    r.authRoleList != null ||
    r.authRoleAdd != null ||
    r.authRoleDelete != null ||
    r.authRoleGet != null ||
    r.authRoleGrantPermission != null ||
    r.authRoleRevokePermission != null ||
    r.clusterVersionSet != null ||
    r.clusterMemberAttrSet != null ||
    r.downgradeInfoSet != null
  );
}

/** Field 100 (header): two tag bytes. */
const HEADER_TAG = (100 << 3) | WIRE_DELIMITED;

/** The encoded request, or null when it carries a request only protobufjs writes. Throws NotFast. */
export function encodeInternalFast(req: Obj): Buffer | null {
  if (hasOtherField(req)) return null;
  const size =
    int64FieldSize(req.ID) +
    subSize(req.range, rangeRequestSize) +
    subSize(req.put, putRequestSize) +
    subSize(req.deleteRange, deleteRangeRequestSize) +
    subSize(req.txn, txnRequestSize) +
    subSize(req.compaction, compactionRequestSize) +
    subSize(req.header, requestHeaderSize, 2);
  const w = new Writer(Buffer.allocUnsafe(size));
  writeInt64Field(w, 0x08, req.ID);
  writeSub(w, 0x1a, req.range, rangeRequestSize, writeRangeRequest);
  writeSub(w, 0x22, req.put, putRequestSize, writePutRequest);
  writeSub(w, 0x2a, req.deleteRange, deleteRangeRequestSize, writeDeleteRangeRequest);
  writeSub(w, 0x32, req.txn, txnRequestSize, writeTxnRequest);
  writeSub(w, 0x3a, req.compaction, compactionRequestSize, writeCompactionRequest);
  writeSub(w, HEADER_TAG, req.header, requestHeaderSize, writeRequestHeader);
  return w.done();
}

/** Every field at its default, keys in protobufjs's toObject order (by field number). */
function emptyInternalRequest(): InternalRaftRequest {
  return {
    ID: '0',
    range: null,
    put: null,
    deleteRange: null,
    txn: null,
    compaction: null,
    leaseGrant: null,
    leaseRevoke: null,
    alarm: null,
    leaseCheckpoint: null,
    header: null,
    authEnable: null,
    authDisable: null,
    authenticate: null,
    authStatus: null,
    authUserAdd: null,
    authUserDelete: null,
    authUserGet: null,
    authUserChangePassword: null,
    authUserGrantRole: null,
    authUserRevokeRole: null,
    authUserList: null,
    authRoleList: null,
    authRoleAdd: null,
    authRoleDelete: null,
    authRoleGet: null,
    authRoleGrantPermission: null,
    authRoleRevokePermission: null,
    clusterVersionSet: null,
    clusterMemberAttrSet: null,
    downgradeInfoSet: null,
  };
}

/** The decoded request, or null when it holds a field only protobufjs reads. Throws NotFast. */
export function decodeInternalFast(buf: Buffer): InternalRaftRequest | null {
  const r = new Reader(buf);
  const m = emptyInternalRequest();
  const end = buf.length;
  while (r.pos < end) {
    const t = r.tag();
    const wt = t & 7;
    const f = t >>> 3;
    if (f === 1) {
      if (wt !== WIRE_VARINT) return null;
      m.ID = r.uint64String();
      continue;
    }
    if (wt !== WIRE_DELIMITED) return null;
    switch (f) {
      case 3:
        m.range = decodeRangeRequestAt(r, r.messageEnd());
        break;
      case 4:
        m.put = decodePutRequestAt(r, r.messageEnd());
        break;
      case 5:
        m.deleteRange = decodeDeleteRangeRequestAt(r, r.messageEnd());
        break;
      case 6:
        m.txn = decodeTxnRequestAt(r, r.messageEnd());
        break;
      case 7:
        m.compaction = decodeCompactionRequestAt(r, r.messageEnd());
        break;
      case 100:
        m.header = decodeRequestHeaderAt(r, r.messageEnd());
        break;
      default:
        return null;
    }
  }
  return m;
}
