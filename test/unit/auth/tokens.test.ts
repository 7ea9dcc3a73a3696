import crypto from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { JwtTokenProvider, SimpleTokenProvider } from '../../../src/auth/tokens';
import { hashPassword, verifyPassword } from '../../../src/auth/password';

describe('simple tokens', () => {
  it('look like etcd tokens, name their user, renew on use and expire', () => {
    let now = 1_000_000;
    const p = new SimpleTokenProvider(300_000, () => now);
    p.enable();
    const prefix = p.genPrefix();
    expect(prefix).toMatch(/^[a-zA-Z]{16}$/);
    const tok = p.assign('alice', 3, 42, prefix);
    expect(tok).toBe(`${prefix}.42`);
    expect(p.info(tok, 7)).toEqual({ username: 'alice', revision: 7 });
    now += 299_000;
    expect(p.info(tok, 7)?.username).toBe('alice');
    now += 299_000;
    expect(p.info(tok, 7)?.username).toBe('alice');
    now += 300_001;
    expect(p.info(tok, 7)).toBeNull();
  });

  it('are dropped when the user changes or auth is disabled', () => {
    const p = new SimpleTokenProvider(300_000);
    p.enable();
    const a = p.assign('alice', 1, 1, p.genPrefix());
    const b = p.assign('bob', 1, 2, p.genPrefix());
    p.invalidateUser('alice');
    expect(p.info(a, 1)).toBeNull();
    expect(p.info(b, 1)?.username).toBe('bob');
    p.disable();
    expect(p.info(b, 1)).toBeNull();
  });
});

describe('JWT tokens', () => {
  const pairs = {
    RS256: () => crypto.generateKeyPairSync('rsa', { modulusLength: 2048 }),
    ES256: () => crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' }),
  } as const;
  for (const alg of ['RS256', 'ES256'] as const) {
    it(`sign and verify with ${alg}, carrying user and revision`, () => {
      const { privateKey, publicKey } = pairs[alg]();
      const priv = privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
      const pub = publicKey.export({ type: 'spki', format: 'pem' }).toString();
      let now = 5_000_000;
      const p = new JwtTokenProvider({ signMethod: alg, privateKey: priv, publicKey: pub, ttlMs: 60_000 }, () => now);
      const tok = p.assign('alice', 9);
      expect(tok.split('.')).toHaveLength(3);
      expect(p.info(tok)).toEqual({ username: 'alice', revision: 9 });
      expect(p.info(tok.slice(0, -4) + 'AAAA')).toBeNull();
      now += 61_000;
      expect(p.info(tok)).toBeNull();
    });
  }
});

describe('passwords', () => {
  it('verify only the password they were made from', async () => {
    const h = await hashPassword('s3cret');
    expect(await verifyPassword('s3cret', h)).toBe(true);
    expect(await verifyPassword('other', h)).toBe(false);
    expect(await verifyPassword('s3cret', '$2a$10$bcrypthashfrometcd')).toBe(false);
  });
});
