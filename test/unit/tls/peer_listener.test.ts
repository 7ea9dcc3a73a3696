// The peer port's TLS, ended by us so that etcd's checks after the handshake apply there too:
// --peer-cert-allowed-cn, --peer-cert-allowed-hostname and --peer-crl-file.
import fs from 'node:fs';
import tls from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TlsFiles } from '../../../src/config/types';
import { listenPeerTls, loadTlsMaterial } from '../../../src/tls';
import { generateKubeadmPki, makeCrl, type CertPair, type KubeadmPki } from '../../helpers/certs';
import { waitFor } from '../../helpers/wait';

let pki: KubeadmPki;
beforeAll(() => {
  pki = generateKubeadmPki([
    { name: 'node-a', ips: ['127.0.0.1'] },
    { name: 'node-b', ips: ['127.0.0.1'] },
  ]);
});
afterAll(() => {
  fs.rmSync(pki.dir, { recursive: true, force: true });
});

function peerFiles(over: Partial<TlsFiles>): TlsFiles {
  const peer = pki.peer.get('node-a')!;
  return {
    certFile: peer.cert,
    keyFile: peer.key,
    clientCertFile: '',
    clientKeyFile: '',
    trustedCaFile: pki.ca.cert,
    clientCertAuth: true,
    crlFile: '',
    allowedHostnames: [],
    allowedCns: [],
    autoTls: false,
    skipClientSanVerify: false,
    ...over,
  };
}

/** Connects as `client`; resolves true when the server accepted the connection (it answers 'ok'). */
function dial(port: number, client: CertPair): Promise<boolean> {
  return new Promise((resolve) => {
    const s = tls.connect({ host: '127.0.0.1', port, ca: fs.readFileSync(pki.ca.cert), cert: fs.readFileSync(client.cert), key: fs.readFileSync(client.key), ALPNProtocols: ['h2'] });
    let got = '';
    s.setEncoding('utf8');
    s.on('data', (d: string) => (got += d));
    s.on('close', () => resolve(got === 'ok'));
    s.on('error', () => undefined);
  });
}

async function serve(over: Partial<TlsFiles>) {
  const lines: { msg: string; fields: Record<string, unknown> }[] = [];
  const log = { warn: (msg: string, fields: Record<string, unknown> = {}) => lines.push({ msg, fields }) };
  const m = loadTlsMaterial(peerFiles(over), { tlsMinVersion: '', tlsMaxVersion: '', cipherSuites: [] });
  const l = await listenPeerTls('127.0.0.1:0', m, log, (s) => s.end('ok'));
  return { l, lines };
}

describe('peer TLS listener', () => {
  it('accepts only peers whose certificate CN is allowed (--peer-cert-allowed-cn), logging the others', async () => {
    const { l, lines } = await serve({ allowedCns: ['node-b'] });
    try {
      expect(await dial(l.port, pki.peer.get('node-b')!)).toBe(true);
      expect(await dial(l.port, pki.peer.get('node-a')!)).toBe(false);
      const r = await waitFor('a rejection', () => lines.find((x) => x.msg === 'rejected connection'));
      expect(r.fields['error']).toBe('client certificate authentication failed');
    } finally {
      l.close();
    }
  });

  it('refuses revoked peers (--peer-crl-file) and untrusted ones', async () => {
    const crl = makeCrl(pki.dir, pki.ca, [pki.peer.get('node-b')!], { expired: true });
    const { l, lines } = await serve({ crlFile: crl.pem });
    try {
      expect(await dial(l.port, pki.peer.get('node-a')!)).toBe(true);
      expect(await dial(l.port, pki.peer.get('node-b')!)).toBe(false);
      expect(await dial(l.port, pki.strangerClient)).toBe(false);
      const r = await waitFor('two rejections', () => (lines.length >= 2 ? lines : undefined));
      expect(r.map((x) => String(x.fields['error'])).join('\n')).toMatch(/transport: certificate serial [0-9a-f]+ revoked/);
    } finally {
      l.close();
    }
  });
});
