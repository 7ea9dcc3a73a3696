// The client listener with TLS, in-process: gRPC (ALPN h2) and HTTP/1.1 on one https:// port and
// a unixs:// socket, client certificates checked, bad clients refused promptly with a log line.
import fs from 'node:fs';
import type http from 'node:http';
import http2 from 'node:http2';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { healthService } from '../../../src/api/health';
import { listenClientUrls, type ClientListeners } from '../../../src/api/listener';
import { clientConstructor, serviceDefinition } from '../../../src/pb/load';
import type { TlsFiles } from '../../../src/config/types';
import { loadTlsMaterial } from '../../../src/tls';
import { certSerial, generateKubeadmPki, makeCrl, mutualTlsFiles, type CertPair, type KubeadmPki } from '../../helpers/certs';
import { waitFor } from '../../helpers/wait';

interface Line {
  level: string;
  msg: string;
  fields: Record<string, unknown>;
}

let pki: KubeadmPki;
let tmp: string;
beforeAll(() => {
  pki = generateKubeadmPki([{ name: 'node-a', ips: ['127.0.0.1'] }]);
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'listener-tls-'));
});
afterAll(() => {
  fs.rmSync(pki.dir, { recursive: true, force: true });
  fs.rmSync(tmp, { recursive: true, force: true });
});

function files(over: Partial<TlsFiles>): TlsFiles {
  return mutualTlsFiles(pki.server.get('node-a')!, pki.ca, over);
}

type Handler = (req: http.IncomingMessage, res: http.ServerResponse) => void;

const plainHandler: Handler = (req, res) => {
  res.writeHead(200, { 'Content-Type': 'text/plain' });
  res.end(`http1 ${req.url}`);
};

async function start(
  over: Partial<TlsFiles> = {},
  urls?: string[],
  handshakeMs?: number,
  handler: Handler = plainHandler,
): Promise<{ l: ClientListeners; lines: Line[]; grpcServer: grpc.Server }> {
  const lines: Line[] = [];
  const rec = (level: string) => (msg: string, fields: Record<string, unknown> = {}) => lines.push({ level, msg, fields });
  const log = { info: rec('info'), warn: rec('warn'), error: rec('error'), debug: rec('debug') };
  const grpcServer = new grpc.Server();
  grpcServer.addService(serviceDefinition('grpc.health.v1.Health'), healthService(() => true));
  const material = loadTlsMaterial(files(over), { tlsMinVersion: '', tlsMaxVersion: '', cipherSuites: [] });
  const l = await listenClientUrls(
    urls ?? ['https://127.0.0.1:0'],
    grpcServer,
    handler,
    log,
    { tls: material, tlsHandshakeTimeoutMs: handshakeMs },
  );
  return { l, lines, grpcServer };
}

function healthCheck(target: string, client: CertPair | undefined, extra: grpc.ChannelOptions = {}): Promise<number> {
  const Ctor = clientConstructor('grpc.health.v1.Health');
  const creds = grpc.credentials.createSsl(
    fs.readFileSync(pki.ca.cert),
    client ? fs.readFileSync(client.key) : null,
    client ? fs.readFileSync(client.cert) : null,
  );
  const c = new Ctor(target, creds, { 'grpc.use_local_subchannel_pool': 1, ...extra });
  return new Promise<number>((resolve, reject) => {
    (c as unknown as { Check: (r: object, o: grpc.CallOptions, cb: (e: grpc.ServiceError | null, r: { status: number }) => void) => void }).Check(
      { service: '' },
      { deadline: Date.now() + 3_000 },
      (e, r) => {
        c.close();
        if (e) reject(e);
        else resolve(r.status);
      },
    );
  });
}

function http1(port: number, client: CertPair, alpn: string[] | undefined): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = tls.connect({
      port,
      host: '127.0.0.1',
      ca: fs.readFileSync(pki.ca.cert),
      cert: fs.readFileSync(client.cert),
      key: fs.readFileSync(client.key),
      ...(alpn ? { ALPNProtocols: alpn } : {}),
    });
    let data = '';
    s.setEncoding('utf8');
    s.on('secureConnect', () => s.write('GET /x HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n'));
    s.on('data', (d: string) => {
      data += d;
    });
    s.on('end', () => resolve(data));
    s.on('error', reject);
  });
}

describe('listenClientUrls with TLS', () => {
  it('serves gRPC over ALPN h2 and HTTP/1.1 (with or without ALPN) on one https:// port, with client certificates', async () => {
    const { l, lines } = await start();
    try {
      const port = l.addresses[0]!.port;
      expect(l.addresses[0]!.url).toBe(`https://127.0.0.1:${port}`);
      expect(lines.some((x) => x.msg === 'serving client traffic securely')).toBe(true);
      expect(await healthCheck(`127.0.0.1:${port}`, pki.apiserverEtcdClient)).toBe(1);
      for (const alpn of [['http/1.1'], undefined]) {
        const reply = await http1(port, pki.healthcheckClient, alpn);
        expect(reply.startsWith('HTTP/1.1 200 OK\r\n')).toBe(true);
        expect(reply).toContain('http1 /x');
      }
    } finally {
      await l.close();
    }
  });

  it('serves plain HTTP requests negotiated as h2 (curl on https://) with the HTTP handler, next to gRPC', async () => {
    // The handler as the gateway's watch writes it: headers set ahead, a chunked HTTP/1.1 body in
    // pieces, the request body read to its end.
    const handler: Handler = (req, res) => {
      let body = '';
      req.setEncoding('utf8');
      req.on('data', (d: string) => (body += d));
      req.on('end', () => {
        res.setHeader('X-Seen', `${req.method} ${req.url} ${req.headers['content-type'] ?? '-'}`);
        res.writeHead(201, { 'Content-Type': 'application/json', 'Transfer-Encoding': 'chunked' });
        res.write(`{"got":${JSON.stringify(body)}}\n`);
        res.end('{"last":true}\n');
      });
    };
    const { l } = await start({}, undefined, undefined, handler);
    const port = l.addresses[0]!.port;
    const client = pki.healthcheckClient;
    const session = http2.connect(`https://127.0.0.1:${port}`, {
      ca: fs.readFileSync(pki.ca.cert),
      cert: fs.readFileSync(client.cert),
      key: fs.readFileSync(client.key),
    });
    try {
      const reply = await new Promise<{ headers: http2.IncomingHttpHeaders; body: string }>((resolve, reject) => {
        const req = session.request({ ':method': 'POST', ':path': '/v3/kv/put?x=1', 'content-type': 'application/json' });
        let body = '';
        let headers: http2.IncomingHttpHeaders = {};
        req.setEncoding('utf8');
        req.on('response', (h) => (headers = h));
        req.on('data', (d: string) => (body += d));
        req.on('end', () => resolve({ headers, body }));
        req.on('error', reject);
        req.write('{"key":');
        req.end('"Zm9v"}');
      });
      expect(reply.headers[':status']).toBe(201);
      expect(reply.headers['x-seen']).toBe('POST /v3/kv/put?x=1 application/json');
      expect(reply.headers).not.toHaveProperty('transfer-encoding');
      expect(reply.body).toBe('{"got":"{\\"key\\":\\"Zm9v\\"}"}\n{"last":true}\n');
      // HEAD: the handler's headers, no body (as Node's ServerResponse does on HTTP/1.1).
      const head = await new Promise<{ headers: http2.IncomingHttpHeaders; body: string }>((resolve, reject) => {
        const req = session.request({ ':method': 'HEAD', ':path': '/h' });
        let body = '';
        let headers: http2.IncomingHttpHeaders = {};
        req.on('response', (h) => (headers = h));
        req.on('data', (d: Buffer) => (body += d.toString()));
        req.on('end', () => resolve({ headers, body }));
        req.on('error', reject);
        req.end();
      });
      expect(head.headers[':status']).toBe(201);
      expect(head.headers['x-seen']).toBe('HEAD /h -');
      expect(head.body).toBe('');
      // gRPC still goes to gRPC on the same port.
      expect(await healthCheck(`127.0.0.1:${port}`, pki.apiserverEtcdClient)).toBe(1);
    } finally {
      session.close();
      await l.close();
    }
  });

  it('refuses missing and untrusted client certificates at the handshake, logging "rejected connection"', async () => {
    const { l, lines } = await start();
    try {
      const target = `127.0.0.1:${l.addresses[0]!.port}`;
      await expect(healthCheck(target, undefined)).rejects.toMatchObject({ code: grpc.status.UNAVAILABLE });
      await expect(healthCheck(target, pki.strangerClient)).rejects.toMatchObject({ code: grpc.status.UNAVAILABLE });
      const rejected = await waitFor('two rejections', () => {
        const r = lines.filter((x) => x.level === 'warn' && x.msg === 'rejected connection');
        return r.length >= 2 ? r : undefined;
      });
      expect(rejected[0]!.fields['remote-addr']).toMatch(/^127\.0\.0\.1:\d+$/);
      expect(rejected.map((r) => String(r.fields['error'])).join('\n')).toMatch(/certificate/);
    } finally {
      await l.close();
    }
  });

  it('rejects certificates revoked by --client-crl-file after the handshake, even with an expired CRL, as etcd does', async () => {
    // OpenSSL would refuse every client once the CRL is past its nextUpdate (etcd's own fixture
    // is from 2021); etcd only looks the serials up.
    const crl = makeCrl(pki.dir, pki.ca, [pki.healthcheckClient], { expired: true });
    const { l, lines } = await start({ crlFile: crl.der });
    try {
      const target = `127.0.0.1:${l.addresses[0]!.port}`;
      expect(await healthCheck(target, pki.apiserverEtcdClient)).toBe(1);
      await expect(healthCheck(target, pki.healthcheckClient)).rejects.toMatchObject({ code: grpc.status.UNAVAILABLE });
      const rejected = await waitFor('a rejection', () => lines.find((x) => x.level === 'warn' && x.msg === 'rejected connection'));
      const serial = certSerial(pki.healthcheckClient).toLowerCase().replace(/^0+/, '');
      expect(rejected.fields['error']).toBe(`transport: certificate serial ${serial.length % 2 ? '0' + serial : serial} revoked`);
    } finally {
      await l.close();
    }
  });

  it('closes plain-text connections at once and silent ones after the handshake timeout', async () => {
    const { l, lines } = await start({}, undefined, 300);
    try {
      const port = l.addresses[0]!.port;
      const closedAfter = (payload: Buffer | undefined): Promise<number> =>
        new Promise((resolve) => {
          const t0 = Date.now();
          const s = net.connect(port, '127.0.0.1', () => {
            if (payload) s.write(payload);
          });
          s.on('error', () => undefined);
          s.on('close', () => resolve(Date.now() - t0));
          setTimeout(() => s.destroy(), 5_000).unref();
        });
      expect(await closedAfter(Buffer.from('GET / HTTP/1.1\r\nHost: a\r\n\r\n'))).toBeLessThan(1_000);
      expect(await closedAfter(Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n'))).toBeLessThan(1_000);
      const silent = await closedAfter(undefined);
      expect(silent).toBeGreaterThanOrEqual(250);
      expect(silent).toBeLessThan(3_000);
      await waitFor('plain-text rejection logged', () =>
        lines.some((x) => x.msg === 'rejected connection' && x.fields['error'] === 'tls: first record does not look like a TLS handshake'),
      );
    } finally {
      await l.close();
    }
  });

  it('accepts only the allowed client CN when --client-cert-allowed-cn style checks are set', async () => {
    const { l, lines } = await start({ allowedCns: ['kube-apiserver-etcd-client'] });
    try {
      const target = `127.0.0.1:${l.addresses[0]!.port}`;
      expect(await healthCheck(target, pki.apiserverEtcdClient)).toBe(1);
      await expect(healthCheck(target, pki.healthcheckClient)).rejects.toMatchObject({ code: grpc.status.UNAVAILABLE });
      await waitFor('CN rejection logged', () => lines.some((x) => x.fields['error'] === 'client certificate authentication failed'));
    } finally {
      await l.close();
    }
  });

  it('serves TLS on unixs:// sockets too', async () => {
    const sock = path.join(tmp, 'etcd.sock');
    const { l } = await start({}, [`unixs://${sock}`]);
    try {
      expect(await healthCheck(`unix:${sock}`, pki.apiserverEtcdClient, { 'grpc.ssl_target_name_override': 'localhost', 'grpc.default_authority': 'localhost' })).toBe(1);
    } finally {
      await l.close();
    }
  });

  it('refuses https:// without certificates, as etcd does', async () => {
    const grpcServer = new grpc.Server();
    const log = { info: () => undefined, warn: () => undefined, error: () => undefined, debug: () => undefined };
    await expect(listenClientUrls(['https://127.0.0.1:0'], grpcServer, () => undefined, log)).rejects.toThrow(
      'TLS key/cert (--cert-file, --key-file) must be provided for client url https://127.0.0.1:0 with HTTPS scheme',
    );
  });
});
