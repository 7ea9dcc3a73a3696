// Turns a decoded gRPC response (proto-loader plain object, keepCase, longs as strings) into a
// form that is equal between two independent servers given the same request sequence:
// identities chosen per server (cluster/member/lease IDs, ports, term, version) become labels.

export interface NormalizeContext {
  memberId?: string;
  /** Lease ID -> label, in order of first appearance; shared across one run. */
  readonly leases: Map<string, string>;
  readonly clientPort: number;
  readonly peerPort: number;
}

const MEMBER_LABEL = '<member>';
const BYTE_FIELDS_PRINTABLE = /^[\x20-\x7e]*$/;

function bytesToText(b: Buffer): string {
  const s = b.toString('utf8');
  if (BYTE_FIELDS_PRINTABLE.test(s)) return s.length > 200 ? `${s.slice(0, 40)}...(${s.length} bytes)` : s;
  return `hex:${b.toString('hex')}`;
}

function leaseLabel(ctx: NormalizeContext, id: string): string {
  if (id === '0') return '0';
  if (ctx.memberId !== undefined && id === ctx.memberId) return MEMBER_LABEL;
  let label = ctx.leases.get(id);
  if (label === undefined) {
    label = `<lease${ctx.leases.size + 1}>`;
    ctx.leases.set(id, label);
  }
  return label;
}

function replacePorts(s: string, ctx: NormalizeContext): string {
  return s
    .split(`:${ctx.clientPort}`)
    .join(':<client-port>')
    .split(`:${ctx.peerPort}`)
    .join(':<peer-port>');
}

/** Normalise one value found under `key` inside `parent`. */
function norm(v: unknown, key: string, parent: Record<string, unknown> | undefined, ctx: NormalizeContext): unknown {
  if (Buffer.isBuffer(v)) return bytesToText(v);
  if (Array.isArray(v)) {
    const arr = v.map((x) => norm(x, key, parent, ctx));
    // etcd returns these from Go maps: no defined order.
    if (key === 'keys' || key === 'leases') arr.sort((a, b) => (JSON.stringify(a) < JSON.stringify(b) ? -1 : 1));
    return arr;
  }
  if (v !== null && typeof v === 'object') {
    const o = v as Record<string, unknown>;
    if (key === 'header' && typeof o['member_id'] === 'string' && ctx.memberId === undefined) {
      ctx.memberId = o['member_id'];
    }
    const out: Record<string, unknown> = {};
    for (const k of Object.keys(o).sort()) out[k] = norm(o[k], k, o, ctx);
    return out;
  }
  if (typeof v === 'string') {
    switch (key) {
      case 'cluster_id':
        return '<cluster>';
      case 'member_id':
      case 'leader':
        return v === '0' ? '0' : MEMBER_LABEL;
      case 'raft_term':
      case 'raftTerm':
        return '<term>';
      case 'raftIndex':
      case 'raftAppliedIndex':
      case 'dbSize':
      case 'dbSizeInUse':
        return '<n>';
      case 'version':
        return /^\d+\.\d+\.\d+/.test(v) ? '<version>' : v;
      case 'ID':
      case 'lease':
        return leaseLabel(ctx, v);
      case 'TTL': {
        // Remaining TTL ticks down while the sequence runs: equal to the granted TTL give or take 2 s.
        const granted = parent?.['grantedTTL'];
        if (typeof granted === 'string' && Number(v) > 0) {
          const d = Number(granted) - Number(v);
          return d >= 0 && d <= 2 ? '<granted-ttl>' : v;
        }
        return v;
      }
      default:
        return replacePorts(v, ctx);
    }
  }
  return v;
}

export function normalize(v: unknown, ctx: NormalizeContext): unknown {
  return norm(v, '', undefined, ctx);
}

/** A small line diff (LCS) of two pretty-printed JSON values; '-' lines from a, '+' from b. */
export function lineDiff(a: string, b: string): string {
  const x = a.split('\n');
  const y = b.split('\n');
  const n = x.length;
  const m = y.length;
  if (n * m > 4_000_000) return `--- a\n${a}\n+++ b\n${b}`;
  const lcs: number[][] = Array.from({ length: n + 1 }, () => new Array<number>(m + 1).fill(0));
  for (let i = n - 1; i >= 0; i--) {
    for (let j = m - 1; j >= 0; j--) {
      lcs[i]![j] = x[i] === y[j] ? lcs[i + 1]![j + 1]! + 1 : Math.max(lcs[i + 1]![j]!, lcs[i]![j + 1]!);
    }
  }
  const out: string[] = [];
  let i = 0;
  let j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && x[i] === y[j]) {
      out.push(`  ${x[i]}`);
      i++;
      j++;
    } else if (j < m && (i >= n || lcs[i]![j + 1]! >= lcs[i + 1]![j]!)) {
      out.push(`+ ${y[j]}`);
      j++;
    } else {
      out.push(`- ${x[i]}`);
      i++;
    }
  }
  return out.join('\n');
}
