// The certificates kubeadm generates for a stacked etcd (kubeadm init phase certs etcd-*),
// made with openssl: etcd CA, server and peer (SANs: node name, localhost, node IPs, 127.0.0.1,
// ::1), healthcheck-client, apiserver-etcd-client; plus a second CA for refusal tests.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { TlsFiles } from '../../src/config/types';

export interface CertPair {
  cert: string;
  key: string;
}

export interface KubeadmPki {
  /** The directory playing /etc/kubernetes/pki. */
  dir: string;
  /** etcd/ca.crt, etcd/ca.key */
  ca: CertPair;
  /** etcd/server.crt per member name. */
  server: Map<string, CertPair>;
  /** etcd/peer.crt per member name. */
  peer: Map<string, CertPair>;
  /** etcd/healthcheck-client.crt */
  healthcheckClient: CertPair;
  /** apiserver-etcd-client.crt (in pki/, not pki/etcd/). */
  apiserverEtcdClient: CertPair;
  /** A client certificate from a CA etcd does not trust. */
  strangerClient: CertPair;
  strangerCa: CertPair;
}

export interface MemberSans {
  name: string;
  ips: string[];
}

const OPENSSL_TIMEOUT_MS = 30_000;
const VALID_DAYS = 365;

function openssl(args: string[]): void {
  execFileSync('openssl', args, { stdio: ['ignore', 'ignore', 'pipe'], timeout: OPENSSL_TIMEOUT_MS });
}

function makeCa(dir: string, base: string, cn: string): CertPair {
  const p = { cert: path.join(dir, `${base}.crt`), key: path.join(dir, `${base}.key`) };
  openssl(['genrsa', '-out', p.key, '2048']);
  openssl([
    'req', '-x509', '-new', '-key', p.key, '-out', p.cert, '-days', String(VALID_DAYS * 10), '-subj', `/CN=${cn}`,
    '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,digitalSignature,keyEncipherment,keyCertSign',
  ]);
  return p;
}

function makeLeaf(
  dir: string,
  base: string,
  ca: CertPair,
  subject: string,
  usages: Array<'serverAuth' | 'clientAuth'>,
  sans: string[],
): CertPair {
  const p = { cert: path.join(dir, `${base}.crt`), key: path.join(dir, `${base}.key`) };
  const csr = path.join(dir, `${base}.csr`);
  const ext = path.join(dir, `${base}.ext`);
  const lines = [
    'basicConstraints = critical, CA:FALSE',
    'keyUsage = critical, digitalSignature, keyEncipherment',
    `extendedKeyUsage = ${usages.join(', ')}`,
  ];
  if (sans.length > 0) lines.push(`subjectAltName = ${sans.join(', ')}`);
  fs.writeFileSync(ext, `${lines.join('\n')}\n`);
  openssl(['genrsa', '-out', p.key, '2048']);
  openssl(['req', '-new', '-key', p.key, '-out', csr, '-subj', subject]);
  openssl([
    'x509', '-req', '-in', csr, '-CA', ca.cert, '-CAkey', ca.key, '-CAcreateserial', '-out', p.cert,
    '-days', String(VALID_DAYS), '-sha256', '-extfile', ext,
  ]);
  fs.rmSync(csr);
  fs.rmSync(ext);
  return p;
}

/** kubeadm's SANs for etcd/server and etcd/peer: node name, localhost, node IPs, loopbacks. */
export function kubeadmSans(m: MemberSans): string[] {
  const ips = [...new Set([...m.ips, '127.0.0.1', '::1'])];
  return [`DNS:${m.name}`, 'DNS:localhost', ...ips.map((ip) => `IP:${ip}`)];
}

/** Generates the pki tree under a fresh temp dir (or `dir`). Takes about a second per member. */
export function generateKubeadmPki(members: MemberSans[], dir?: string): KubeadmPki {
  const root = dir ?? fs.mkdtempSync(path.join(os.tmpdir(), 'kube-pki-'));
  const etcdDir = path.join(root, 'etcd');
  fs.mkdirSync(etcdDir, { recursive: true });
  const ca = makeCa(etcdDir, 'ca', 'etcd-ca');
  const server = new Map<string, CertPair>();
  const peer = new Map<string, CertPair>();
  for (const m of members) {
    const sub = members.length === 1 ? etcdDir : path.join(etcdDir, m.name);
    fs.mkdirSync(sub, { recursive: true });
    server.set(m.name, makeLeaf(sub, 'server', ca, `/CN=${m.name}`, ['serverAuth', 'clientAuth'], kubeadmSans(m)));
    peer.set(m.name, makeLeaf(sub, 'peer', ca, `/CN=${m.name}`, ['serverAuth', 'clientAuth'], kubeadmSans(m)));
  }
  const healthcheckClient = makeLeaf(etcdDir, 'healthcheck-client', ca, '/CN=kube-etcd-healthcheck-client', ['clientAuth'], []);
  const apiserverEtcdClient = makeLeaf(root, 'apiserver-etcd-client', ca, '/O=system:masters/CN=kube-apiserver-etcd-client', ['clientAuth'], []);
  const strangerDir = path.join(root, 'stranger');
  fs.mkdirSync(strangerDir, { recursive: true });
  const strangerCa = makeCa(strangerDir, 'ca', 'not-the-etcd-ca');
  const strangerClient = makeLeaf(strangerDir, 'client', strangerCa, '/CN=kube-apiserver-etcd-client', ['clientAuth'], []);
  return { dir: root, ca, server, peer, healthcheckClient, apiserverEtcdClient, strangerClient, strangerCa };
}

/**
 * A CRL from `ca` revoking `revoked` (openssl ca), written as PEM and DER. `expired`: its
 * nextUpdate is in the past, as in etcd's own fixture revoke.crl (2021).
 */
export function makeCrl(dir: string, ca: CertPair, revoked: CertPair[], opts: { expired?: boolean } = {}): { pem: string; der: string } {
  const work = fs.mkdtempSync(path.join(dir, 'crl-'));
  const cnf = path.join(work, 'ca.cnf');
  fs.writeFileSync(path.join(work, 'index.txt'), '');
  fs.writeFileSync(cnf, `[ ca ]\ndefault_ca = d\n[ d ]\ndatabase = ${path.join(work, 'index.txt')}\ndefault_md = sha256\ndefault_crl_days = 1\n`);
  for (const c of revoked) openssl(['ca', '-config', cnf, '-keyfile', ca.key, '-cert', ca.cert, '-revoke', c.cert]);
  const pem = path.join(work, 'crl.pem');
  const dates = opts.expired ? ['-crl_lastupdate', '20200101000000Z', '-crl_nextupdate', '20200102000000Z'] : [];
  openssl(['ca', '-config', cnf, '-keyfile', ca.key, '-cert', ca.cert, '-gencrl', ...dates, '-out', pem]);
  const der = path.join(work, 'crl.der');
  openssl(['crl', '-in', pem, '-outform', 'DER', '-out', der]);
  return { pem, der };
}

/** A certificate's serial as `openssl x509 -serial` prints it (upper-case hex). */
export function certSerial(c: CertPair): string {
  return execFileSync('openssl', ['x509', '-in', c.cert, '-noout', '-serial'], { encoding: 'utf8', timeout: OPENSSL_TIMEOUT_MS }).trim().replace(/^serial=/, '');
}

/** The TLS flags of a member serving `pair`, trusting `ca` and requiring client certificates. */
export function mutualTlsFiles(pair: CertPair, ca: CertPair, over: Partial<TlsFiles> = {}): TlsFiles {
  return {
    certFile: pair.cert,
    keyFile: pair.key,
    clientCertFile: '',
    clientKeyFile: '',
    trustedCaFile: ca.cert,
    clientCertAuth: true,
    crlFile: '',
    allowedHostnames: [],
    allowedCns: [],
    autoTls: false,
    skipClientSanVerify: false,
    ...over,
  };
}
