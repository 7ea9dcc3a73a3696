// Password hashes with node:crypto scrypt; the format names its parameters so they can change
// later. bcrypt hashes (etcd's, kept by users restored from a snapshot of etcd) are verified too.
import crypto from 'node:crypto';
import { isBcryptHash, verifyBcrypt } from './bcrypt';

const SALT_BYTES = 16;
const HASH_BYTES = 32;
/** scrypt cost (N); about bcrypt cost 10 in time on this kind of machine. */
const SCRYPT_N = 16384;
const MAX_PASSWORD_BYTES = 1024 * 1024;

function scrypt(password: string, salt: Buffer, n: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    crypto.scrypt(password, salt, HASH_BYTES, { N: n, r: 8, p: 1, maxmem: 64 * 1024 * 1024 }, (err, key) => {
      if (err) reject(err);
      else resolve(key);
    });
  });
}

/** `scrypt$<N>$<salt b64>$<hash b64>` */
export async function hashPassword(password: string): Promise<string> {
  if (Buffer.byteLength(password) > MAX_PASSWORD_BYTES) throw new Error('password too long');
  const salt = crypto.randomBytes(SALT_BYTES);
  const hash = await scrypt(password, salt, SCRYPT_N);
  return `scrypt$${SCRYPT_N}$${salt.toString('base64')}$${hash.toString('base64')}`;
}

/** False for a wrong password and for hashes we cannot read. */
export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  // etcd's own hashes, kept by users restored from a snapshot of etcd (etcdutl).
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
