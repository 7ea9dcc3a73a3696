// Go's parsing rules for flag values (strconv, time.ParseDuration, strconv.Quote), so that
// every value etcd accepts is accepted here with the same meaning, and every value it
// rejects is rejected with the same message.

export class GoSyntaxError extends Error {}
export class GoRangeError extends Error {}

const lower = (c: string): string => c.toLowerCase();

/** Go's strconv.Quote for the characters that matter in flag messages. */
export function goQuote(s: string): string {
  let out = '"';
  for (const ch of s) {
    const c = ch.codePointAt(0) ?? 0;
    if (ch === '"') out += '\\"';
    else if (ch === '\\') out += '\\\\';
    else if (ch === '\n') out += '\\n';
    else if (ch === '\t') out += '\\t';
    else if (ch === '\r') out += '\\r';
    else if (c === 7) out += '\\a';
    else if (c === 8) out += '\\b';
    else if (c === 12) out += '\\f';
    else if (c === 11) out += '\\v';
    else if (c < 0x20 || c === 0x7f) out += '\\x' + c.toString(16).padStart(2, '0');
    else out += ch;
  }
  return out + '"';
}

/** strconv.ParseBool. */
export function parseGoBool(s: string): boolean | undefined {
  switch (s) {
    case '1':
    case 't':
    case 'T':
    case 'true':
    case 'TRUE':
    case 'True':
      return true;
    case '0':
    case 'f':
    case 'F':
    case 'false':
    case 'FALSE':
    case 'False':
      return false;
    default:
      return undefined;
  }
}

// strconv's rule for '_' digit separators (only valid with base prefix detection).
function underscoreOK(s0: string): boolean {
  let saw = '^';
  let s = s0;
  let i = 0;
  if (s.length >= 1 && (s[0] === '-' || s[0] === '+')) s = s.slice(1);
  let hex = false;
  if (s.length >= 2 && s[0] === '0' && 'box'.includes(lower(s[1]))) {
    i = 2;
    saw = '0';
    hex = lower(s[1]) === 'x';
  }
  for (; i < s.length; i++) {
    const c = s[i];
    if ((c >= '0' && c <= '9') || (hex && lower(c) >= 'a' && lower(c) <= 'f')) {
      saw = '0';
      continue;
    }
    if (c === '_') {
      if (saw !== '0') return false;
      saw = '_';
      continue;
    }
    if (saw === '_') return false;
    saw = '!';
  }
  return saw !== '_';
}

/** strconv.ParseUint(s, 0, bitSize): 0x/0o/0b prefixes, leading-0 octal, '_' separators. */
export function parseGoUint(s: string, bitSize: number): bigint {
  const fn = 'strconv.ParseUint';
  const syntax = () => new GoSyntaxError(`${fn}: parsing ${goQuote(s)}: invalid syntax`);
  const range = () => new GoRangeError(`${fn}: parsing ${goQuote(s)}: value out of range`);
  if (s.length === 0) throw syntax();
  let base = 10n;
  let digits = s;
  if (s[0] === '0') {
    if (s.length >= 3 && lower(s[1]) === 'b') {
      base = 2n;
      digits = s.slice(2);
    } else if (s.length >= 3 && lower(s[1]) === 'o') {
      base = 8n;
      digits = s.slice(2);
    } else if (s.length >= 3 && lower(s[1]) === 'x') {
      base = 16n;
      digits = s.slice(2);
    } else {
      base = 8n;
      digits = s.slice(1);
    }
  }
  const max = (1n << BigInt(bitSize)) - 1n;
  let n = 0n;
  let underscores = false;
  for (const c of digits) {
    if (c === '_') {
      underscores = true;
      continue;
    }
    let d: number;
    const lc = lower(c);
    if (c >= '0' && c <= '9') d = c.charCodeAt(0) - 48;
    else if (lc >= 'a' && lc <= 'z') d = lc.charCodeAt(0) - 87;
    else throw syntax();
    if (BigInt(d) >= base) throw syntax();
    n = n * base + BigInt(d);
    if (n > max) throw range();
  }
  if (underscores && !underscoreOK(s)) throw syntax();
  return n;
}

/** strconv.ParseInt(s, 0, bitSize). */
export function parseGoInt(s: string, bitSize: number): bigint {
  const fn = 'strconv.ParseInt';
  if (s.length === 0) throw new GoSyntaxError(`${fn}: parsing "": invalid syntax`);
  let body = s;
  let neg = false;
  if (s[0] === '+' || s[0] === '-') {
    neg = s[0] === '-';
    body = s.slice(1);
  }
  let un: bigint;
  try {
    un = parseGoUint(body, 64);
  } catch (e) {
    if (e instanceof GoRangeError) throw new GoRangeError(`${fn}: parsing ${goQuote(s)}: value out of range`);
    throw new GoSyntaxError(`${fn}: parsing ${goQuote(s)}: invalid syntax`);
  }
  if (body !== s && body.includes('_') && !underscoreOK(s)) {
    throw new GoSyntaxError(`${fn}: parsing ${goQuote(s)}: invalid syntax`);
  }
  const cutoff = 1n << BigInt(bitSize - 1);
  if ((!neg && un >= cutoff) || (neg && un > cutoff)) {
    throw new GoRangeError(`${fn}: parsing ${goQuote(s)}: value out of range`);
  }
  return neg ? -un : un;
}

const NS_PER: Record<string, bigint> = {
  ns: 1n,
  us: 1_000n,
  'µs': 1_000n, // U+00B5
  'μs': 1_000n, // U+03BC
  ms: 1_000_000n,
  s: 1_000_000_000n,
  m: 60_000_000_000n,
  h: 3_600_000_000_000n,
};

const MAX_DURATION_NS = (1n << 63n) - 1n;

/** time.ParseDuration: returns nanoseconds. Throws Error with Go's message. */
export function parseGoDuration(orig: string): bigint {
  const invalid = () => new GoSyntaxError(`time: invalid duration ${goQuote(orig)}`);
  let s = orig;
  let neg = false;
  if (s !== '' && (s[0] === '-' || s[0] === '+')) {
    neg = s[0] === '-';
    s = s.slice(1);
  }
  if (s === '0') return 0n;
  if (s === '') throw invalid();
  let total = 0n;
  const isDigit = (c: string | undefined) => c !== undefined && c >= '0' && c <= '9';
  while (s !== '') {
    if (!(s[0] === '.' || isDigit(s[0]))) throw invalid();
    let i = 0;
    let v = 0n;
    while (isDigit(s[i])) {
      v = v * 10n + BigInt(s.charCodeAt(i) - 48);
      if (v > 1n << 63n) throw invalid();
      i++;
    }
    const pre = i > 0;
    s = s.slice(i);
    let post = false;
    let f = 0;
    let scale = 1;
    if (s !== '' && s[0] === '.') {
      s = s.slice(1);
      let j = 0;
      let overflow = false;
      while (isDigit(s[j])) {
        if (!overflow) {
          // Go stops accumulating once the next digit would overflow int64, but keeps consuming.
          if (f > (2 ** 63 - 1) / 10) overflow = true;
          else {
            f = f * 10 + (s.charCodeAt(j) - 48);
            scale *= 10;
          }
        }
        j++;
      }
      post = j > 0;
      s = s.slice(j);
    }
    if (!pre && !post) throw invalid();
    let k = 0;
    while (k < s.length && !(s[k] === '.' || isDigit(s[k]))) k++;
    if (k === 0) throw new GoSyntaxError(`time: missing unit in duration ${goQuote(orig)}`);
    const unitText = s.slice(0, k);
    s = s.slice(k);
    const unit = NS_PER[unitText];
    if (unit === undefined) {
      throw new GoSyntaxError(`time: unknown unit ${goQuote(unitText)} in duration ${goQuote(orig)}`);
    }
    if (v > (1n << 63n) / unit) throw invalid();
    v *= unit;
    if (f > 0) {
      v += BigInt(Math.trunc(f * (Number(unit) / scale)));
      if (v > 1n << 63n) throw invalid();
    }
    total += v;
    if (total > 1n << 63n) throw invalid();
  }
  if (neg) return -total;
  if (total > MAX_DURATION_NS) throw invalid();
  return total;
}

/** strconv.Atoi (base 10, optional sign, no separators); undefined when it would fail. */
export function parseGoAtoi(s: string): number | undefined {
  if (!/^[+-]?[0-9]+$/.test(s)) return undefined;
  const n = BigInt(s);
  if (n > (1n << 63n) - 1n || n < -(1n << 63n)) return undefined;
  return Number(n);
}
