// Token providers: etcd's simple tokens (random prefix + raft index, kept in memory on every
// member, TTL renewed on use) and JWT (signed with node:crypto, self-describing).
import assert from 'node:assert';
import crypto from 'node:crypto';
import fs from 'node:fs';
import type { AuthInfo } from './store';

export interface TokenProvider {
  readonly kind: 'simple' | 'jwt';
  /** Before the proposal: the part the leader's entry carries (simple tokens only). */
  genPrefix(): string;
  /** On apply: the token for a user who authenticated at `index` with auth revision `rev`. */
  assign(username: string, rev: number, index: number, prefix: string): string;
  /** The user and revision a token stands for, or null when it is not (or no longer) valid. */
  info(token: string, currentRev: number): AuthInfo | null;
  enable(): void;
  disable(): void;
  invalidateUser(username: string): void;
}

/** Tokens kept at most; the oldest goes first when full. */
const MAX_SIMPLE_TOKENS = 100_000;
const LETTERS = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ';
const SIMPLE_PREFIX_LETTERS = 16;

export class SimpleTokenProvider implements TokenProvider {
  readonly kind = 'simple' as const;
  /** token -> user and expiry; Map order is the refresh order (oldest first). */
  private readonly tokens = new Map<string, { username: string; expiresAtMs: number }>();
  private enabled = false;

  constructor(
    private readonly ttlMs: number,
    private readonly nowMs: () => number = Date.now,
  ) {
    assert(ttlMs > 0);
  }

  genPrefix(): string {
    const bytes = crypto.randomBytes(SIMPLE_PREFIX_LETTERS);
    let s = '';
    for (const b of bytes) s += LETTERS[b % LETTERS.length];
    return s;
  }

  assign(username: string, _rev: number, index: number, prefix: string): string {
    const token = `${prefix}.${index}`;
    if (!this.enabled) return token;
    while (this.tokens.size >= MAX_SIMPLE_TOKENS) {
      const oldest = this.tokens.keys().next().value;
      if (oldest === undefined) break;
      this.tokens.delete(oldest);
    }
    this.tokens.set(token, { username, expiresAtMs: this.nowMs() + this.ttlMs });
    return token;
  }

  info(token: string, currentRev: number): AuthInfo | null {
    const t = this.tokens.get(token);
    if (!t) return null;
    const now = this.nowMs();
    this.tokens.delete(token);
    if (t.expiresAtMs <= now) return null;
    t.expiresAtMs = now + this.ttlMs;
    this.tokens.set(token, t);
    return { username: t.username, revision: currentRev };
  }

  enable(): void {
    this.enabled = true;
  }

  disable(): void {
    this.enabled = false;
    this.tokens.clear();
  }

  invalidateUser(username: string): void {
    for (const [tok, t] of this.tokens) if (t.username === username) this.tokens.delete(tok);
  }
}

type JwtAlg = 'RS256' | 'RS384' | 'RS512' | 'PS256' | 'PS384' | 'PS512' | 'ES256' | 'ES384' | 'ES512' | 'HS256' | 'HS384' | 'HS512';

const HASH_OF: Record<string, string> = { '256': 'sha256', '384': 'sha384', '512': 'sha512' };
const ES_BYTES: Record<string, number> = { '256': 32, '384': 48, '512': 66 };

export interface JwtOptions {
  signMethod: JwtAlg;
  /** PEM text (or the HMAC secret). */
  privateKey: string | null;
  publicKey: string | null;
  ttlMs: number;
}

function b64url(b: Buffer): string {
  return b.toString('base64url');
}

export class JwtTokenProvider implements TokenProvider {
  readonly kind = 'jwt' as const;
  private readonly priv: crypto.KeyObject | null;
  private readonly pub: crypto.KeyObject | null;
  private readonly secret: Buffer | null;

  constructor(
    private readonly opts: JwtOptions,
    private readonly nowMs: () => number = Date.now,
  ) {
    if (opts.signMethod.startsWith('HS')) {
      assert(opts.privateKey !== null, 'HMAC JWT needs priv-key');
      this.secret = Buffer.from(opts.privateKey);
      this.priv = null;
      this.pub = null;
    } else {
      this.secret = null;
      this.priv = opts.privateKey !== null ? crypto.createPrivateKey(opts.privateKey) : null;
      this.pub = opts.publicKey !== null ? crypto.createPublicKey(opts.publicKey) : this.priv ? crypto.createPublicKey(this.priv) : null;
      assert(this.pub !== null, 'JWT needs pub-key or priv-key');
    }
  }

  genPrefix(): string {
    return '';
  }

  private signBytes(data: Buffer): Buffer {
    const alg = this.opts.signMethod;
    const hash = HASH_OF[alg.slice(2)];
    if (this.secret) return crypto.createHmac(hash, this.secret).update(data).digest();
    assert(this.priv, 'JWT signing needs priv-key');
    if (alg.startsWith('PS')) return crypto.sign(hash, data, { key: this.priv, padding: crypto.constants.RSA_PKCS1_PSS_PADDING, saltLength: crypto.constants.RSA_PSS_SALTLEN_DIGEST });
    if (alg.startsWith('ES')) return crypto.sign(hash, data, { key: this.priv, dsaEncoding: 'ieee-p1363' });
    return crypto.sign(hash, data, this.priv);
  }

  private verifyBytes(data: Buffer, sig: Buffer): boolean {
    const alg = this.opts.signMethod;
    const hash = HASH_OF[alg.slice(2)];
    if (this.secret) {
      const want = crypto.createHmac(hash, this.secret).update(data).digest();
      return want.length === sig.length && crypto.timingSafeEqual(want, sig);
    }
    assert(this.pub);
    if (alg.startsWith('PS')) return crypto.verify(hash, data, { key: this.pub, padding: crypto.constants.RSA_PKCS1_PSS_PADDING, saltLength: crypto.constants.RSA_PSS_SALTLEN_AUTO }, sig);
    if (alg.startsWith('ES')) {
      if (sig.length !== 2 * ES_BYTES[alg.slice(2)]) return false;
      return crypto.verify(hash, data, { key: this.pub, dsaEncoding: 'ieee-p1363' }, sig);
    }
    return crypto.verify(hash, data, this.pub, sig);
  }

  assign(username: string, rev: number): string {
    const header = b64url(Buffer.from(JSON.stringify({ alg: this.opts.signMethod, typ: 'JWT' })));
    const claims = { username, revision: rev, exp: Math.floor((this.nowMs() + this.opts.ttlMs) / 1000) };
    const body = b64url(Buffer.from(JSON.stringify(claims)));
    const signingInput = `${header}.${body}`;
    return `${signingInput}.${b64url(this.signBytes(Buffer.from(signingInput)))}`;
  }

  info(token: string): AuthInfo | null {
    const parts = token.split('.');
    if (parts.length !== 3) return null;
    try {
      const hdr = JSON.parse(Buffer.from(parts[0], 'base64url').toString()) as { alg?: string };
      if (hdr.alg !== this.opts.signMethod) return null;
      if (!this.verifyBytes(Buffer.from(`${parts[0]}.${parts[1]}`), Buffer.from(parts[2], 'base64url'))) return null;
      const c = JSON.parse(Buffer.from(parts[1], 'base64url').toString()) as { username?: unknown; revision?: unknown; exp?: unknown };
      if (typeof c.username !== 'string' || typeof c.revision !== 'number') return null;
      if (typeof c.exp === 'number' && c.exp * 1000 <= this.nowMs()) return null;
      return { username: c.username, revision: c.revision };
    } catch {
      return null;
    }
  }

  enable(): void {}
  disable(): void {}
  invalidateUser(): void {}
}

/** Go's time.ParseDuration for the simple forms etcd's docs use ("5m", "300s", "1h30m"). */
function parseDurationMs(s: string): number {
  const re = /(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)/gy;
  const unit: Record<string, number> = { ns: 1e-6, us: 1e-3, µs: 1e-3, ms: 1, s: 1000, m: 60_000, h: 3_600_000 };
  let total = 0;
  let m: RegExpExecArray | null;
  let consumed = 0;
  while ((m = re.exec(s)) !== null) {
    total += Number(m[1]) * unit[m[2]];
    consumed = re.lastIndex;
  }
  if (consumed !== s.length || s.length === 0) throw new Error(`invalid duration ${s}`);
  return total;
}

const JWT_ALGS: readonly string[] = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'HS256', 'HS384', 'HS512'];
/** etcd's default JWT TTL. */
const DEFAULT_JWT_TTL_MS = 5 * 60_000;

/** A provider from `--auth-token` ("simple" or "jwt,pub-key=...,priv-key=...,sign-method=...,ttl=..."). */
export function tokenProviderFromSpec(spec: string, simpleTtlSec: number): TokenProvider {
  const [kind, ...rest] = spec.split(',');
  if (kind === 'simple' || kind === '') return new SimpleTokenProvider(simpleTtlSec * 1000);
  if (kind !== 'jwt') throw new Error(`unknown token type: ${kind}`);
  const kv = new Map<string, string>();
  for (const p of rest) {
    const i = p.indexOf('=');
    if (i <= 0) throw new Error(`invalid auth token option: ${p}`);
    kv.set(p.slice(0, i), p.slice(i + 1));
  }
  const method = kv.get('sign-method') ?? '';
  if (!JWT_ALGS.includes(method)) throw new Error(`invalid auth options: unsupported sign method ${method}`);
  const read = (k: string): string | null => {
    const f = kv.get(k);
    return f ? fs.readFileSync(f, 'utf8') : null;
  };
  return new JwtTokenProvider({
    signMethod: method as JwtAlg,
    privateKey: read('priv-key'),
    publicKey: read('pub-key'),
    ttlMs: kv.has('ttl') ? parseDurationMs(kv.get('ttl') as string) : DEFAULT_JWT_TTL_MS,
  });
}
