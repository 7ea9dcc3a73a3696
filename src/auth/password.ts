// Password hashes: bcrypt, as etcd makes them (bcrypt.ts). Hashes written by earlier versions of
// etcd-ts (scrypt$<N>$<salt>$<hash>, node:crypto scrypt) still verify.
import crypto from 'node:crypto';
import { hashBcrypt, isBcryptHash, verifyBcrypt } from './bcrypt';

const HASH_BYTES = 32;
const MAX_PASSWORD_BYTES = 1024 * 1024;

function scrypt(password: string, salt: Buffer, n: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    crypto.scrypt(password, salt, HASH_BYTES, { N: n, r: 8, p: 1, maxmem: 64 * 1024 * 1024 }, (err, key) => {
      if (err) reject(err);
      else resolve(key);
    });
  });
}

/** etcd's default --bcrypt-cost. */
export const DEFAULT_BCRYPT_COST = 10;

/** A bcrypt hash at `bcryptCost`, as etcd makes one (etcd verifies it, and so do we). */
export async function hashPassword(password: string, bcryptCost = DEFAULT_BCRYPT_COST): Promise<string> {
  if (Buffer.byteLength(password) > MAX_PASSWORD_BYTES) throw new Error('password too long');
  return hashBcrypt(password, bcryptCost);
}

/** False for a wrong password and for hashes we cannot read. */
export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  if (isBcryptHash(stored)) return verifyBcrypt(password, stored);
  const parts = stored.split('$');
  if (parts.length !== 4 || parts[0] !== 'scrypt') return false;
  const n = Number(parts[1]);
  if (!Number.isSafeInteger(n) || n < 2 || n > 1 << 20) return false;
  const salt = Buffer.from(parts[2], 'base64');
  const want = Buffer.from(parts[3], 'base64');
  if (want.length !== HASH_BYTES) return false;
  const got = await scrypt(password, salt, n);
  return crypto.timingSafeEqual(got, want);
}
