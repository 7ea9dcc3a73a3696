// The peer port's TLS, ended by us so that etcd's checks after the handshake apply there too:
// --peer-cert-allowed-cn, --peer-cert-allowed-hostname and --peer-crl-file.
import fs from 'node:fs';
import tls from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TlsFiles } from '../../../src/config/types';
import * as grpc from '@grpc/grpc-js';
import { healthService } from '../../../src/api/health';
import { clientConstructor, serviceDefinition } from '../../../src/pb/load';
import { channelCredentials, listenPeerTls, loadTlsMaterial, type TlsCommon } from '../../../src/tls';
import { generateKubeadmPki, makeCrl, mutualTlsFiles, type CertPair, type KubeadmPki } from '../../helpers/certs';
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
  return mutualTlsFiles(pki.peer.get('node-a')!, pki.ca, over);
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

const DEFAULT_COMMON: TlsCommon = { tlsMinVersion: '', tlsMaxVersion: '', cipherSuites: [] };

async function serve(over: Partial<TlsFiles>) {
  const lines: { msg: string; fields: Record<string, unknown> }[] = [];
  const log = { warn: (msg: string, fields: Record<string, unknown> = {}) => lines.push({ msg, fields }) };
  const m = loadTlsMaterial(peerFiles(over), DEFAULT_COMMON);
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

  it('dials peers with the TLS versions and cipher suites the flags set, as etcd does', async () => {
    // A peer port that speaks TLS 1.3 only, serving gRPC on the verified connections.
    const server = new grpc.Server();
    server.addService(serviceDefinition('grpc.health.v1.Health'), healthService(() => true));
    const injector = server.createConnectionInjector(grpc.ServerCredentials.createInsecure());
    const log = { warn: () => undefined };
    const l = await listenPeerTls('127.0.0.1:0', loadTlsMaterial(peerFiles({}), { ...DEFAULT_COMMON, tlsMinVersion: 'TLS1.3' }), log, (s) => injector.injectConnection(s));
    const check = (common: TlsCommon): Promise<number> => {
      const Ctor = clientConstructor('grpc.health.v1.Health');
      const material = loadTlsMaterial(peerFiles({ certFile: pki.peer.get('node-b')!.cert, keyFile: pki.peer.get('node-b')!.key }), common);
      const c = new Ctor(`127.0.0.1:${l.port}`, channelCredentials(material), { 'grpc.use_local_subchannel_pool': 1 });
      return new Promise<number>((resolve, reject) => {
        c.check({ service: '' }, { deadline: Date.now() + 3000 }, (err: grpc.ServiceError | null, res: { status: number } | undefined) => {
          c.close();
          if (err) reject(err);
          else resolve(res!.status);
        });
      });
    };
    try {
      expect(await check(DEFAULT_COMMON)).toBe(1);
      await expect(check({ ...DEFAULT_COMMON, tlsMaxVersion: 'TLS1.2' })).rejects.toMatchObject({ code: grpc.status.UNAVAILABLE });
    } finally {
      l.close();
      server.forceShutdown();
    }
  });
});
