// bcrypt password hashes ("$2a$10$..."), the form etcd stores: new passwords are hashed with it at
// --bcrypt-cost, so users carried between etcd and etcd-ts (snapshots, etcdutl) keep working
// both ways, and etcd's hashes verify here. Node has no bcrypt, so this is the algorithm
// (Provos and Mazières, 1999): Blowfish with an expensive key schedule, its initial state the
// hexadecimal digits of pi, computed here once instead of carried as a 4 KiB table.
import crypto from 'node:crypto';
import { nextTurn } from '../runtime/next_turn';

const P_WORDS = 18;
const S_WORDS = 4 * 256;
/** "OrpheanBeholderScryDoubt": what bcrypt encrypts 64 times. */
const MAGIC_TEXT = Buffer.from('OrpheanBeholderScryDoubt');
const BCRYPT_ALPHABET = './ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
const SALT_BYTES = 16;
const HASH_BYTES = 23;
export const BCRYPT_MIN_COST = 4;
export const BCRYPT_MAX_COST = 31;
/** Key schedule rounds between yields to the event loop (cost 10: 1024 rounds, ~32 yields). */
const ROUNDS_PER_YIELD = 32;
const MAX_KEY_BYTES = 72;

let piWords: Uint32Array | null = null;

/** The first `count` 32-bit words of pi's fractional part in hexadecimal (Machin's formula). */
function piFractionWords(count: number): Uint32Array {
  const bits = BigInt(count * 32 + 64);
  const one = 1n << bits;
  // atan(1/x) * 2^bits as a series of exact integer divisions.
  const atanInv = (x: bigint): bigint => {
    const x2 = x * x;
    let term = one / x;
    let sum = term;
    for (let k = 1n; term !== 0n; k++) {
      term /= x2;
      const t = term / (2n * k + 1n);
      sum = k % 2n === 1n ? sum - t : sum + t;
    }
    return sum;
  };
  const pi = 16n * atanInv(5n) - 4n * atanInv(239n);
  let frac = (pi - 3n * one) >> 64n;
  const out = new Uint32Array(count);
  for (let i = count - 1; i >= 0; i--) {
    out[i] = Number(frac & 0xffffffffn);
    frac >>= 32n;
  }
  return out;
}

function initialState(): Uint32Array {
  if (piWords === null) {
    piWords = piFractionWords(P_WORDS + S_WORDS);
    // Blowfish's published first and last constants: a wrong table must never verify anything.
    if (piWords[0] !== 0x243f6a88 || piWords[P_WORDS] !== 0xd1310ba6 || piWords[P_WORDS + S_WORDS - 1] !== 0x3ac372e6) {
      throw new Error('bcrypt: Blowfish initial state does not match its published constants');
    }
  }
  return piWords.slice();
}

/** Blowfish state: P-array at [0, 18), S-boxes at [18, 18 + 1024). */
class Blowfish {
  readonly st = initialState();
  private readonly out = new Uint32Array(2);

  private f(x: number): number {
    const s = this.st;
    return ((((s[P_WORDS + (x >>> 24)] + s[P_WORDS + 256 + ((x >>> 16) & 0xff)]) >>> 0) ^ s[P_WORDS + 512 + ((x >>> 8) & 0xff)]) + s[P_WORDS + 768 + (x & 0xff)]) >>> 0;
  }

  /** Encrypts one block; the result is in this.out. */
  encrypt(l: number, r: number): Uint32Array {
    const p = this.st;
    l = (l ^ p[0]) >>> 0;
    for (let i = 1; i <= 16; i += 2) {
      r = (r ^ this.f(l) ^ p[i]) >>> 0;
      l = (l ^ this.f(r) ^ p[i + 1]) >>> 0;
    }
    this.out[0] = (r ^ p[17]) >>> 0;
    this.out[1] = l;
    return this.out;
  }

  /** Blowfish's ExpandKey, with bcrypt's salt mixed into the blocks when `salt` is given. */
  expandKey(key: Buffer, salt: Buffer | null): void {
    const st = this.st;
    let kPos = 0;
    for (let i = 0; i < P_WORDS; i++) {
      let w = 0;
      for (let j = 0; j < 4; j++) {
        w = ((w << 8) | key[kPos]) >>> 0;
        kPos = (kPos + 1) % key.length;
      }
      st[i] = (st[i] ^ w) >>> 0;
    }
    let sPos = 0;
    const saltWord = (): number => {
      if (salt === null) return 0;
      const w = salt.readUInt32BE(sPos);
      sPos = (sPos + 4) % salt.length;
      return w;
    };
    let l = 0;
    let r = 0;
    for (let i = 0; i < st.length; i += 2) {
      l = (l ^ saltWord()) >>> 0;
      r = (r ^ saltWord()) >>> 0;
      const o = this.encrypt(l, r);
      l = o[0];
      r = o[1];
      st[i] = l;
      st[i + 1] = r;
    }
  }
}

function decodeBcryptBase64(s: string, bytes: number): Buffer | null {
  const out = Buffer.alloc(bytes);
  let bits = 0;
  let acc = 0;
  let n = 0;
  for (const ch of s) {
    const v = BCRYPT_ALPHABET.indexOf(ch);
    if (v < 0) return null;
    acc = (acc << 6) | v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      if (n < bytes) out[n++] = (acc >>> bits) & 0xff;
    }
  }
  return n === bytes ? out : null;
}

export function isBcryptHash(stored: string): boolean {
  return /^\$2[abxy]?\$\d{2}\$[./A-Za-z0-9]{53}$/.test(stored);
}

function encodeBcryptBase64(b: Buffer): string {
  let out = '';
  let acc = 0;
  let bits = 0;
  for (const byte of b) {
    acc = (acc << 8) | byte;
    bits += 8;
    while (bits >= 6) {
      bits -= 6;
      out += BCRYPT_ALPHABET[(acc >>> bits) & 0x3f];
    }
  }
  if (bits > 0) out += BCRYPT_ALPHABET[(acc << (6 - bits)) & 0x3f];
  return out;
}

/** A new hash of `password` at `cost`, in the form Go's bcrypt (and so etcd) writes: $2a$10$<salt><hash>. */
export async function hashBcrypt(password: string, cost: number): Promise<string> {
  if (!(Number.isInteger(cost) && cost >= BCRYPT_MIN_COST && cost <= BCRYPT_MAX_COST)) throw new Error(`bcrypt cost ${cost} outside [${BCRYPT_MIN_COST}, ${BCRYPT_MAX_COST}]`);
  const salt = crypto.randomBytes(SALT_BYTES);
  const hash = await bcryptRaw(password, salt, cost);
  return `$2a$${String(cost).padStart(2, '0')}$${encodeBcryptBase64(salt)}${encodeBcryptBase64(hash)}`;
}

/** Whether `password` matches the bcrypt hash `stored`; false for anything that is not one. */
export async function verifyBcrypt(password: string, stored: string): Promise<boolean> {
  if (!isBcryptHash(stored)) return false;
  const [, , costText, rest] = stored.split('$');
  const cost = Number(costText);
  if (!(cost >= BCRYPT_MIN_COST && cost <= BCRYPT_MAX_COST)) return false;
  const salt = decodeBcryptBase64(rest.slice(0, 22), SALT_BYTES);
  const want = decodeBcryptBase64(rest.slice(22), HASH_BYTES);
  if (salt === null || want === null) return false;
  return crypto.timingSafeEqual(await bcryptRaw(password, salt, cost), want);
}

/** The 23 bytes bcrypt keeps of its ciphertext. */
async function bcryptRaw(password: string, salt: Buffer, cost: number): Promise<Buffer> {
  // The key is the password and its terminating NUL, at most 72 bytes (Blowfish's P-array).
  const key = Buffer.concat([Buffer.from(password, 'utf8'), Buffer.from([0])]).subarray(0, MAX_KEY_BYTES);
  const bf = new Blowfish();
  bf.expandKey(key, salt);
  const rounds = 2 ** cost;
  for (let i = 0; i < rounds; i++) {
    bf.expandKey(key, null);
    bf.expandKey(salt, null);
    if ((i + 1) % ROUNDS_PER_YIELD === 0) await nextTurn();
  }
  const words = new Uint32Array(6);
  for (let i = 0; i < 6; i++) words[i] = MAGIC_TEXT.readUInt32BE(i * 4);
  for (let n = 0; n < 64; n++) {
    for (let j = 0; j < 6; j += 2) {
      const o = bf.encrypt(words[j], words[j + 1]);
      words[j] = o[0];
      words[j + 1] = o[1];
    }
  }
  const got = Buffer.alloc(24);
  for (let i = 0; i < 6; i++) got.writeUInt32BE(words[i], i * 4);
  return got.subarray(0, HASH_BYTES);
}
