import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { TlsFiles } from '../../../src/config/types';
import { loadTlsMaterial, resolveMemberTls, selfCert, serverTlsOptions, subjectAltNames } from '../../../src/tls';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tls-unit-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

interface Captured {
  level: string;
  msg: string;
  fields?: Record<string, unknown>;
}
function captureLog(): { log: { info: (m: string, f?: Record<string, unknown>) => void; warn: (m: string, f?: Record<string, unknown>) => void }; lines: Captured[] } {
  const lines: Captured[] = [];
  return {
    lines,
    log: {
      info: (msg, fields) => lines.push({ level: 'info', msg, fields }),
      warn: (msg, fields) => lines.push({ level: 'warn', msg, fields }),
    },
  };
}

const noFiles: TlsFiles = {
  certFile: '',
  keyFile: '',
  clientCertFile: '',
  clientKeyFile: '',
  trustedCaFile: '',
  clientCertAuth: false,
  crlFile: '',
  allowedHostnames: [],
  allowedCns: [],
  autoTls: false,
  skipClientSanVerify: false,
};
const common = { tlsMinVersion: '', tlsMaxVersion: '', cipherSuites: [] as string[] };

describe('subjectAltNames', () => {
  it('turns listen hosts into IP and DNS SANs, once each', () => {
    expect(subjectAltNames(['127.0.0.1:2379', 'localhost:2379', '[::1]:2379', '127.0.0.1:2380', 'https://etcd-0.etcd:2379'])).toEqual([
      'IP:127.0.0.1',
      'DNS:localhost',
      'IP:::1',
      'DNS:etcd-0.etcd',
    ]);
  });
});

describe('selfCert (--auto-tls)', () => {
  it('creates an ECDSA P-521 certificate for the listen hosts with O=etcd, then reuses it', () => {
    const dir = path.join(tmp, 'fixtures', 'client');
    const { log, lines } = captureLog();
    const first = selfCert(log, dir, ['127.0.0.1:2379', 'localhost:2379'], 2);
    const x = new crypto.X509Certificate(fs.readFileSync(first.certFile));
    expect(x.subject).toContain('O=etcd');
    expect(x.subjectAltName).toContain('IP Address:127.0.0.1');
    expect(x.subjectAltName).toContain('DNS:localhost');
    expect(x.publicKey.asymmetricKeyDetails?.namedCurve).toBe('secp521r1');
    const days = (Date.parse(x.validTo) - Date.now()) / 86_400_000;
    expect(days).toBeGreaterThan(2 * 365 - 2);
    expect(days).toBeLessThan(2 * 365 + 2);
    expect(lines.map((l) => l.msg)).toEqual(['created cert file', 'created key file']);
    expect(fs.statSync(first.keyFile).mode & 0o077).toBe(0);
    const before = fs.readFileSync(first.certFile);
    const again = selfCert(log, dir, ['10.0.0.1:2379'], 1);
    expect(fs.readFileSync(again.certFile).equals(before)).toBe(true);
  });
});

describe('loadTlsMaterial', () => {
  it('names the file it cannot read', () => {
    expect(() => loadTlsMaterial({ ...noFiles, certFile: path.join(tmp, 'nope.crt'), keyFile: path.join(tmp, 'nope.key') }, common)).toThrow(
      /nope\.crt: no such file or directory/,
    );
  });

  it('needs both a certificate and a key, and refuses allowed CN with allowed hostname', () => {
    expect(() => loadTlsMaterial({ ...noFiles, certFile: 'a.crt' }, common)).toThrow(/KeyFile and CertFile must both be present/);
    const c = selfCert(captureLog().log, path.join(tmp, 'x'), ['127.0.0.1:1'], 1);
    expect(() => loadTlsMaterial({ ...noFiles, ...c, allowedCns: ['a'], allowedHostnames: ['b'] }, common)).toThrow(/mutually exclusive/);
  });

  it("maps etcd's TLS versions, cipher suites and client-cert-auth onto Node's options", () => {
    const c = selfCert(captureLog().log, path.join(tmp, 'y'), ['127.0.0.1:1'], 1);
    const m = loadTlsMaterial({ ...noFiles, ...c, trustedCaFile: c.certFile, clientCertAuth: true }, {
      tlsMinVersion: 'TLS1.2',
      tlsMaxVersion: 'TLS1.2',
      cipherSuites: ['TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256', 'TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384'],
    });
    const o = serverTlsOptions(m, ['h2']);
    expect(o.minVersion).toBe('TLSv1.2');
    expect(o.maxVersion).toBe('TLSv1.2');
    expect(o.ciphers).toBe('ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES256-GCM-SHA384');
    expect(o.requestCert).toBe(true);
    expect(o.rejectUnauthorized).toBe(true);
    expect(o.ca).toBeDefined();
    const loose = serverTlsOptions(loadTlsMaterial({ ...noFiles, ...c }, common), ['h2']);
    expect(loose.requestCert).toBe(false);
    expect(loose.minVersion).toBe('TLSv1.2');
    expect(() => loadTlsMaterial({ ...noFiles, ...c }, { ...common, cipherSuites: ['TLS_BOGUS'] })).toThrow(/unexpected TLS cipher suite/);
  });
});

describe('resolveMemberTls', () => {
  const base = {
    listenClientUrls: [{ scheme: 'https', hostname: '127.0.0.1', port: '2379', text: 'https://127.0.0.1:2379' }],
    listenPeerUrls: [{ scheme: 'https', hostname: '127.0.0.1', port: '2380', text: 'https://127.0.0.1:2380' }],
    selfSignedCertValidityYears: 1,
    ...common,
  };

  it('generates client and peer certificates under data-dir/fixtures with --auto-tls / --peer-auto-tls', () => {
    const dataDir = path.join(tmp, 'member-auto');
    const { log, lines } = captureLog();
    const r = resolveMemberTls({ ...base, dataDir, clientTls: { ...noFiles, autoTls: true, clientCertAuth: true }, peerTls: { ...noFiles, autoTls: true } }, log);
    expect(r.client?.certFile).toBe(path.join(dataDir, 'fixtures', 'client', 'cert.pem'));
    expect(r.peer?.certFile).toBe(path.join(dataDir, 'fixtures', 'peer', 'cert.pem'));
    expect(r.client?.selfSigned).toBe(true);
    // etcd replaces the TLS info wholesale: self-signed client TLS does not check client certs.
    expect(r.client?.clientCertAuth).toBe(false);
    const peer = new crypto.X509Certificate(fs.readFileSync(r.peer!.certFile));
    expect(peer.checkIP('127.0.0.1')).toBe('127.0.0.1');
    expect(lines.some((l) => l.msg === 'starting with client TLS' && String(l.fields?.['tls-info']).includes('client-cert-auth = false'))).toBe(true);
    expect(lines.some((l) => l.msg === 'starting with peer TLS')).toBe(true);
  });

  it('prefers given files over --auto-tls and says so; no TLS at all when nothing is set', () => {
    const c = selfCert(captureLog().log, path.join(tmp, 'given'), ['127.0.0.1:1'], 1);
    const { log, lines } = captureLog();
    const r = resolveMemberTls({ ...base, dataDir: path.join(tmp, 'm2'), clientTls: { ...noFiles, ...c, autoTls: true }, peerTls: noFiles }, log);
    expect(r.client?.certFile).toBe(c.certFile);
    expect(r.peer).toBeUndefined();
    expect(lines.some((l) => l.level === 'warn' && l.msg === 'ignoring client auto TLS since certs given')).toBe(true);
    expect(resolveMemberTls({ ...base, dataDir: path.join(tmp, 'm3'), clientTls: noFiles, peerTls: noFiles }, log)).toEqual({ client: undefined, peer: undefined });
  });
});
