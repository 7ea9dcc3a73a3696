import { describe, expect, it } from 'vitest';
import { hashBcrypt, isBcryptHash, verifyBcrypt } from '../../../src/auth/bcrypt';
import { hashPassword, verifyPassword } from '../../../src/auth/password';

// OpenBSD's bcrypt test vectors (cost 5), and hashes etcd 3.4 stored for users it created.
const VECTORS: Array<[string, string]> = [
  ['U*U', '$2a$05$CCCCCCCCCCCCCCCCCCCCC.E5YPO9kmyuRGyh0XouQYb4YMJKvyOeW'],
  ['U*U*', '$2a$05$CCCCCCCCCCCCCCCCCCCCC.VGOzA784oUp/Z0DY336zx7pLYAy0lwK'],
  ['U*U*U', '$2a$05$XXXXXXXXXXXXXXXXXXXXXOAcXxm9kjPGEMsLznoKqmqw7tc8WCx4a'],
  ['', '$2a$05$CCCCCCCCCCCCCCCCCCCCC.7uG0VCzI2bS7j6ymqJi9CdcdxiRTWNy'],
  ['alicepw', '$2a$10$I1dzndYaMpOlGbiAjlu3hu5cBfDCazkYHs28L8apxQdL9NkBLmkSO'],
  ['rootpw', '$2a$10$IO9jionzPCE/lYpK4qmY.uQwyQnMiNRp4ihTiNUcT8fyAUxwtraBW'],
];

describe('bcrypt (etcd’s password hashes)', () => {
  it('verifies the right password and only it', async () => {
    for (const [password, hash] of VECTORS) {
      expect(isBcryptHash(hash)).toBe(true);
      expect(await verifyBcrypt(password, hash), `${password} / ${hash}`).toBe(true);
      expect(await verifyBcrypt(password + 'x', hash)).toBe(false);
      expect(await verifyPassword(password, hash)).toBe(true);
    }
  });

  it('hashes new passwords as Go’s bcrypt writes them ($2a$, the cost, a fresh salt), and they verify', async () => {
    const h = await hashBcrypt('s3cret', 5);
    expect(h).toMatch(/^\$2a\$05\$[./A-Za-z0-9]{53}$/);
    expect(await hashBcrypt('s3cret', 5)).not.toBe(h);
    expect(await verifyBcrypt('s3cret', h)).toBe(true);
    expect(await verifyBcrypt('s3cret!', h)).toBe(false);
    const d = await hashPassword('pw');
    expect(d.startsWith('$2a$10$')).toBe(true);
    expect(await verifyPassword('pw', d)).toBe(true);
    await expect(hashBcrypt('x', 3)).rejects.toThrow('bcrypt cost 3 outside [4, 31]');
  });

  it('rejects what is not a bcrypt hash instead of throwing', async () => {
    for (const bad of ['', '$2a$10$short', '$2a$99$CCCCCCCCCCCCCCCCCCCCC.E5YPO9kmyuRGyh0XouQYb4YMJKvyOeW', 'scrypt$16384$x$y']) {
      expect(await verifyBcrypt('U*U', bad)).toBe(false);
    }
  });
});
