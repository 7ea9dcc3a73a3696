// --auto-tls / --peer-auto-tls: a self-signed certificate in <data-dir>/fixtures/{client,peer},
// reused when both files exist (etcd's transport.SelfCert). Node cannot issue X.509
// certificates itself, so openssl (on PATH; the Docker image installs it) does it.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

export interface SelfCertLogger {
  info(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
}

export interface SelfCertFiles {
  certFile: string;
  keyFile: string;
}

/** Bound on one openssl run; key generation takes milliseconds. */
const OPENSSL_TIMEOUT_MS = 30_000;
const DAYS_PER_YEAR = 365;

/** The host part of each `host:port` (or URL); IPs become IP SANs, the rest DNS SANs. */
export function subjectAltNames(hostPorts: string[]): string[] {
  const out: string[] = [];
  for (const hp of hostPorts) {
    let host = hp.replace(/^[a-z]+:\/\//i, '').replace(/\/.*$/, '');
    const m = /^\[([^\]]+)\](?::\d+)?$/.exec(host);
    if (m) host = m[1]!;
    else if ((host.match(/:/g) ?? []).length === 1) host = host.slice(0, host.indexOf(':'));
    if (host === '') continue;
    const san = net.isIP(host) !== 0 ? `IP:${host}` : `DNS:${host}`;
    if (!out.includes(san)) out.push(san);
  }
  return out;
}

/**
 * Returns the certificate and key under `dir`, generating an ECDSA P-521 self-signed pair
 * (O=etcd, serverAuth plus `extraUsages`) valid for `validityYears` when either file is missing.
 */
export function selfCert(
  log: SelfCertLogger,
  dir: string,
  hostPorts: string[],
  validityYears: number,
  extraUsages: Array<'clientAuth'> = [],
): SelfCertFiles {
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  const certFile = path.join(dir, 'cert.pem');
  const keyFile = path.join(dir, 'key.pem');
  if (fs.existsSync(certFile) && fs.existsSync(keyFile)) return { certFile, keyFile };

  const years = validityYears > 0 ? validityYears : 1;
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'etcd-selfcert-'));
  try {
    const ext = path.join(work, 'ext.cnf');
    const sans = subjectAltNames(hostPorts);
    const lines = [
      '[req]',
      'distinguished_name = dn',
      'prompt = no',
      'x509_extensions = v3',
      '[dn]',
      'O = etcd',
      '[v3]',
      'basicConstraints = critical, CA:FALSE',
      'keyUsage = critical, digitalSignature, keyEncipherment',
      `extendedKeyUsage = ${['serverAuth', ...extraUsages].join(', ')}`,
    ];
    if (sans.length > 0) lines.push(`subjectAltName = ${sans.join(', ')}`);
    fs.writeFileSync(ext, `${lines.join('\n')}\n`);
    const tmpKey = path.join(work, 'key.pem');
    const tmpCert = path.join(work, 'cert.pem');
    const run = (args: string[]): void => {
      execFileSync('openssl', args, { stdio: ['ignore', 'ignore', 'pipe'], timeout: OPENSSL_TIMEOUT_MS });
    };
    run(['ecparam', '-name', 'secp521r1', '-genkey', '-noout', '-out', tmpKey]);
    run(['req', '-new', '-x509', '-key', tmpKey, '-out', tmpCert, '-days', String(years * DAYS_PER_YEAR), '-config', ext, '-sha256']);
    fs.copyFileSync(tmpCert, certFile);
    log.info('created cert file', { path: certFile });
    fs.copyFileSync(tmpKey, keyFile);
    fs.chmodSync(keyFile, 0o600);
    log.info('created key file', { path: keyFile });
  } catch (e) {
    const stderr = (e as { stderr?: Buffer }).stderr?.toString().trim();
    log.warn('cannot generate x509 certificate', { error: stderr || (e as Error).message });
    throw new Error(`cannot generate a self-signed certificate in ${dir}: ${stderr || (e as Error).message}`);
  } finally {
    fs.rmSync(work, { recursive: true, force: true });
  }
  return { certFile, keyFile };
}
