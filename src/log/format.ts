// Encoding of log entries and of the few value types etcd prints in a fixed way
// (Go time stamps, Go durations, hexadecimal IDs).

import type { LogFields, LogValue } from './types';

const MAX_DEPTH = 8;

function pad(n: number, width: number): string {
  return String(n).padStart(width, '0');
}

// Entries within the same second share everything but the microseconds; cache that prefix.
let cachedSecond = Number.NaN;
let cachedPrefix = '';
let cachedZone = '';

/**
 * Go layout "2006-01-02T15:04:05.000000Z0700" in local time, the layout etcd gives zap so its
 * timestamps keep capnslog's microsecond precision. UTC prints a literal "Z".
 */
export function formatLogTime(epochMs: number): string {
  // Integer milliseconds first: dividing a fractional epoch can round up into the next second.
  const wholeMs = Math.floor(epochMs);
  const second = Math.floor(wholeMs / 1000);
  if (second !== cachedSecond) {
    const d = new Date(second * 1000);
    const offsetMin = -d.getTimezoneOffset();
    let zone = 'Z';
    if (offsetMin !== 0) {
      const abs = Math.abs(offsetMin);
      zone = (offsetMin > 0 ? '+' : '-') + pad(Math.floor(abs / 60), 2) + pad(abs % 60, 2);
    }
    cachedPrefix =
      `${pad(d.getFullYear(), 4)}-${pad(d.getMonth() + 1, 2)}-${pad(d.getDate(), 2)}` +
      `T${pad(d.getHours(), 2)}:${pad(d.getMinutes(), 2)}:${pad(d.getSeconds(), 2)}.`;
    cachedZone = zone;
    cachedSecond = second;
  }
  const micros = (wholeMs - second * 1000) * 1000 + Math.min(999, Math.round((epochMs - wholeMs) * 1000));
  return cachedPrefix + pad(micros, 6) + cachedZone;
}

/** etcd prints member, cluster and lease IDs with types.ID.String(): lowercase hex, no padding. */
export function hexId(id: bigint): string {
  return BigInt.asUintN(64, id).toString(16);
}

// Writes the fraction of v / 10^prec without trailing zeros; returns [text, v / 10^prec].
function goFrac(v: bigint, prec: number): [string, bigint] {
  let digits = '';
  let printed = false;
  for (let i = 0; i < prec; i++) {
    const digit = v % 10n;
    printed = printed || digit !== 0n;
    if (printed) digits = digit.toString() + digits;
    v /= 10n;
  }
  return [printed ? '.' + digits : '', v];
}

/** Go's time.Duration.String() of a nanosecond count ("1.5s", "2m0s", "300µs", "0s"). */
export function formatGoDuration(ns: bigint | number): string {
  let u = typeof ns === 'bigint' ? ns : BigInt(Math.trunc(ns));
  const neg = u < 0n;
  if (neg) u = -u;
  let out: string;
  if (u < 1_000_000_000n) {
    if (u === 0n) return '0s';
    let unit: string;
    let prec: number;
    if (u < 1_000n) {
      unit = 'ns';
      prec = 0;
    } else if (u < 1_000_000n) {
      unit = 'µs';
      prec = 3;
    } else {
      unit = 'ms';
      prec = 6;
    }
    const [frac, whole] = goFrac(u, prec);
    out = whole.toString() + frac + unit;
  } else {
    const [frac, wholeSec] = goFrac(u, 9);
    let rest = wholeSec;
    out = (rest % 60n).toString() + frac + 's';
    rest /= 60n;
    if (rest > 0n) {
      out = (rest % 60n).toString() + 'm' + out;
      rest /= 60n;
      if (rest > 0n) out = rest.toString() + 'h' + out;
    }
  }
  return neg ? '-' + out : out;
}

/** Go duration text of a millisecond count (fractions down to nanoseconds are kept). */
export function formatGoDurationMs(ms: number): string {
  return formatGoDuration(BigInt(Math.round(ms * 1e6)));
}

function encodeNumber(n: number): string {
  if (Number.isFinite(n)) return String(n);
  // zap writes non-finite floats as strings.
  if (Number.isNaN(n)) return '"NaN"';
  return n > 0 ? '"+Inf"' : '"-Inf"';
}

export function encodeValue(v: LogValue, depth = 0): string {
  if (v === null || v === undefined) return 'null';
  switch (typeof v) {
    case 'string':
      return JSON.stringify(v);
    case 'number':
      return encodeNumber(v);
    case 'bigint':
      return v.toString();
    case 'boolean':
      return v ? 'true' : 'false';
    default:
      break;
  }
  if (v instanceof Error) return JSON.stringify(v.message);
  if (v instanceof Date) return JSON.stringify(formatLogTime(v.getTime()));
  if (Buffer.isBuffer(v)) return JSON.stringify(v.toString('utf8'));
  if (depth >= MAX_DEPTH) return '"<max depth>"';
  if (Array.isArray(v)) {
    const arr = v as readonly LogValue[];
    return '[' + arr.map((x) => encodeValue(x, depth + 1)).join(',') + ']';
  }
  const obj = v as { readonly [key: string]: LogValue };
  const parts: string[] = [];
  for (const k of Object.keys(obj)) parts.push(JSON.stringify(k) + ':' + encodeValue(obj[k], depth + 1));
  return '{' + parts.join(',') + '}';
}

/** `,"k":v` for each field, in insertion order (zap does not sort or dedupe). */
export function encodeFields(fields: LogFields | undefined): string {
  if (fields === undefined) return '';
  let out = '';
  for (const k of Object.keys(fields)) out += ',' + JSON.stringify(k) + ':' + encodeValue(fields[k]);
  return out;
}

export interface EntryParts {
  level: string;
  tsMs: number;
  caller: string | undefined;
  msg: string;
  /** Pre-encoded `,"k":v` context fields of child loggers. */
  contextFields: string;
  fields: LogFields | undefined;
}

export function encodeJsonEntry(e: EntryParts): string {
  const caller = e.caller === undefined ? '' : `,"caller":${JSON.stringify(e.caller)}`;
  return (
    `{"level":"${e.level}","ts":"${formatLogTime(e.tsMs)}"${caller},"msg":${JSON.stringify(e.msg)}` +
    `${e.contextFields}${encodeFields(e.fields)}}\n`
  );
}

/** zap's console encoder: tab-separated time, level, caller, message, then the fields as JSON. */
export function encodeConsoleEntry(e: EntryParts): string {
  const parts = [formatLogTime(e.tsMs), e.level];
  if (e.caller !== undefined) parts.push(e.caller);
  parts.push(e.msg);
  const f = e.contextFields + encodeFields(e.fields);
  if (f.length > 0) parts.push('{' + f.slice(1) + '}');
  return parts.join('\t') + '\n';
}
