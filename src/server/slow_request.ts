// etcd warns "apply request took too long" when applying a request (or serving a read-only range)
// takes longer than --warning-apply-duration, and counts it in etcd_server_slow_apply_total.
// The request is written in protobuf text form as etcd's loggable stringers write it: values are
// never logged (a put shows value_size), secrets neither.
import type * as pb from '../pb/types';

const COMPARE_RESULTS = ['EQUAL', 'GREATER', 'LESS', 'NOT_EQUAL'];
const COMPARE_TARGETS = ['VERSION', 'CREATE', 'MOD', 'VALUE', 'LEASE'];
const SORT_ORDERS = ['NONE', 'ASCEND', 'DESCEND'];
const SORT_TARGETS = ['KEY', 'VERSION', 'CREATE', 'MOD', 'VALUE'];
/** A key longer than this is cut in the log line (a request may carry keys of up to 1.5 MiB). */
const MAX_LOGGED_KEY_BYTES = 256;

/** Protobuf text quoting of bytes: printable ASCII as is, the rest as C escapes. */
function quote(b: Uint8Array | null | undefined): string {
  let s = '"';
  const n = b ? Math.min(b.length, MAX_LOGGED_KEY_BYTES) : 0;
  for (let i = 0; i < n; i++) {
    const c = b![i];
    if (c === 0x22) s += '\\"';
    else if (c === 0x5c) s += '\\\\';
    else if (c === 0x0a) s += '\\n';
    else if (c === 0x0d) s += '\\r';
    else if (c === 0x09) s += '\\t';
    else if (c >= 0x20 && c < 0x7f) s += String.fromCharCode(c);
    else s += '\\' + c.toString(8).padStart(3, '0');
  }
  if (b && b.length > n) s += '...';
  return s + '"';
}

/** Fields at their zero value are left out, as protobuf's text format does. */
function fields(parts: Array<[string, string | number | boolean | Uint8Array | null | undefined]>): string {
  let s = '';
  for (const [name, v] of parts) {
    if (v === null || v === undefined || v === false || v === 0 || v === '' || v === '0') continue;
    if (v instanceof Uint8Array) {
      if (v.length === 0) continue;
      s += `${name}:${quote(v)} `;
    } else {
      s += `${name}:${String(v)} `;
    }
  }
  return s;
}

function header(h: pb.RequestHeader | null | undefined): string {
  return fields([
    ['ID', h?.ID],
    ['username', h?.username ? JSON.stringify(h.username) : ''],
    ['auth_revision', h?.authRevision],
  ]);
}

export function describeRange(r: pb.RangeRequest): string {
  return fields([
    ['key', r.key],
    ['range_end', r.rangeEnd],
    ['limit', r.limit],
    ['revision', r.revision],
    ['sort_order', r.sortOrder ? SORT_ORDERS[r.sortOrder] ?? r.sortOrder : 0],
    ['sort_target', r.sortTarget ? SORT_TARGETS[r.sortTarget] ?? r.sortTarget : 0],
    ['serializable', r.serializable],
    ['keys_only', r.keysOnly],
    ['count_only', r.countOnly],
    ['min_mod_revision', r.minModRevision],
    ['max_mod_revision', r.maxModRevision],
    ['min_create_revision', r.minCreateRevision],
    ['max_create_revision', r.maxCreateRevision],
  ]);
}

function describePut(p: pb.PutRequest): string {
  return fields([
    ['key', p.key],
    ['value_size', p.value?.length ?? 0],
    ['lease', p.lease],
    ['prev_kv', p.prevKv],
    ['ignore_value', p.ignoreValue],
    ['ignore_lease', p.ignoreLease],
  ]);
}

function describeDelete(d: pb.DeleteRangeRequest): string {
  return fields([
    ['key', d.key],
    ['range_end', d.rangeEnd],
    ['prev_kv', d.prevKv],
  ]);
}

/** The text names of a compare's numeric target fields (its value is logged by size). */
const COMPARE_NUMBER_FIELDS = { version: 'version', createRevision: 'create_revision', modRevision: 'mod_revision', lease: 'lease' } as const;

function describeCompare(c: pb.Compare): string {
  const target = c.targetUnion;
  const value =
    target === undefined ? '' : target === 'value' ? `value_size:${c.value?.length ?? 0} ` : `${COMPARE_NUMBER_FIELDS[target]}:${c[target] ?? '0'} `;
  return `compare:<${fields([
    ['result', c.result ? COMPARE_RESULTS[c.result] ?? c.result : 0],
    ['target', COMPARE_TARGETS[c.target] ?? c.target],
    ['key', c.key],
  ])}${value}${fields([['range_end', c.rangeEnd]])}> `;
}

function describeOp(name: string, op: pb.RequestOp): string {
  if (op.requestRange) return `${name}:<request_range:<${describeRange(op.requestRange)}> > `;
  if (op.requestPut) return `${name}:<request_put:<${describePut(op.requestPut)}> > `;
  if (op.requestDeleteRange) return `${name}:<request_delete_range:<${describeDelete(op.requestDeleteRange)}> > `;
  if (op.requestTxn) return `${name}:<request_txn:<${describeTxn(op.requestTxn)}> > `;
  return `${name}:<> `;
}

function describeTxn(t: pb.TxnRequest): string {
  let s = '';
  for (const c of t.compare ?? []) s += describeCompare(c);
  for (const op of t.success ?? []) s += describeOp('success', op);
  for (const op of t.failure ?? []) s += describeOp('failure', op);
  return s;
}

/** etcd's InternalRaftStringer, for the kinds of request whose apply can take long. */
export function describeInternalRequest(req: pb.InternalRaftRequest): string {
  const h = `header:<${header(req.header)}> `;
  if (req.put) return `${h}put:<${describePut(req.put)}>`;
  if (req.txn) return `${h}txn:<${describeTxn(req.txn)}>`;
  if (req.deleteRange) return `${h}delete_range:<${describeDelete(req.deleteRange)}>`;
  if (req.range) return `${h}range:<${describeRange(req.range)}>`;
  if (req.compaction) return `${h}compaction:<${fields([['revision', req.compaction.revision], ['physical', req.compaction.physical]])}>`;
  if (req.leaseGrant) return `${h}lease_grant:<ttl:${req.leaseGrant.TTL}-second id:${BigInt(req.leaseGrant.ID).toString(16).padStart(16, '0')}>`;
  if (req.leaseRevoke) return `${h}lease_revoke:<id:${BigInt(req.leaseRevoke.ID).toString(16).padStart(16, '0')}>`;
  // The other kinds (auth, membership, alarms) name only their kind: some carry passwords.
  for (const [k, v] of Object.entries(req)) {
    if (k !== 'header' && k !== 'ID' && v !== null && v !== undefined && typeof v === 'object') {
      return `${h}${k.replace(/[A-Z]/g, (c) => '_' + c.toLowerCase())}:<>`;
    }
  }
  return h.trimEnd();
}
