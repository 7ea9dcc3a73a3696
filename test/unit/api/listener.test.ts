import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { testTempDir } from '../../helpers/temp_dir';
import * as grpc from '@grpc/grpc-js';
import { clientConstructor } from '../../../src/pb/load';
import { createGrpcServer } from '../../../src/api/grpc_server';
import { createHttpHandler } from '../../../src/api/http';
import { listenClientUrls } from '../../../src/api/listener';
import { FakeServer } from './fake_server';
import { call, quietLog, waitFor } from './harness';

/** Writes `chunks` with pauses between them and collects the reply until `done(reply)`. */
async function rawExchange(port: number, chunks: string[], done: (reply: string) => boolean): Promise<string> {
  const sock = net.connect(port, '127.0.0.1');
  let reply = '';
  sock.on('data', (d) => (reply += d.toString('latin1')));
  await new Promise<void>((r) => sock.once('connect', () => r()));
  for (const c of chunks) {
    sock.write(c);
    await new Promise((r) => setTimeout(r, 20));
  }
  await waitFor(() => done(reply), 5000, 'raw HTTP reply');
  sock.destroy();
  return reply;
}

describe('listenClientUrls', () => {
  it('routes HTTP/1.1 split into tiny pieces and keep-alive requests, next to gRPC', async () => {
    const fake = new FakeServer();
    const g = createGrpcServer(fake, quietLog);
    const l = await listenClientUrls(['http://127.0.0.1:0'], g.grpcServer, createHttpHandler(fake, quietLog), quietLog);
    try {
      const port = l.addresses[0]!.port;
      expect(port).toBeGreaterThan(0);
      expect(l.addresses[0]!.url).toBe(`http://127.0.0.1:${port}`);
      const req = 'GET /version HTTP/1.1\r\nHost: x\r\n\r\n';
      const reply = await rawExchange(port, ['G', 'ET /ver', 'sion HTTP/1.1\r\nHost: x\r\n\r\n', req], (r) => r.split('etcdcluster').length === 3);
      expect(reply.startsWith('HTTP/1.1 200 OK')).toBe(true);
      // A method starting like the HTTP/2 preface ("P") still goes to HTTP/1.
      const post = await rawExchange(port, ['P', 'OST /health HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n'], (r) => r.includes('\r\n\r\n'));
      expect(post.startsWith('HTTP/1.1 405')).toBe(true);

      const KV = clientConstructor('etcdserverpb.KV');
      const c = new KV(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
      await call(c, 'Put', { key: Buffer.from('a'), value: Buffer.from('b') });
      c.close();
    } finally {
      await l.close();
      g.grpcServer.forceShutdown();
    }
  });

  it('serves a unix socket and closes without hanging while clients stay connected', async () => {
    const dir = testTempDir('api-listener-');
    const sockPath = path.join(dir, 'etcd.sock');
    fs.writeFileSync(path.join(dir, 'placeholder'), '');
    const fake = new FakeServer();
    const g = createGrpcServer(fake, quietLog);
    const handler = createHttpHandler(fake, quietLog);
    const l = await listenClientUrls([`unix://${sockPath}`, 'http://127.0.0.1:0'], g.grpcServer, handler, quietLog);
    expect(l.addresses.map((a) => a.port === 0)).toEqual([true, false]);
    const KV = clientConstructor('etcdserverpb.KV');
    const c = new KV(`unix:${sockPath}`, grpc.credentials.createInsecure());
    await call(c, 'Put', { key: Buffer.from('u'), value: Buffer.from('v') });
    expect(fake.kvs.has('u')).toBe(true);
    // HTTP/1.1 and the JSON gateway on the unix socket too.
    const gw = await new Promise<string>((resolve, reject) => {
      const r = http.request({ socketPath: sockPath, path: '/v3/kv/range', method: 'POST' }, (res) => {
        let body = '';
        res.on('data', (d: Buffer) => (body += d.toString()));
        res.on('end', () => resolve(body));
      });
      r.on('error', reject);
      r.end(JSON.stringify({ key: Buffer.from('u').toString('base64') }));
    });
    expect(JSON.parse(gw)).toMatchObject({ count: '1', kvs: [{ value: Buffer.from('v').toString('base64') }] });
    // An idle HTTP/1 connection and an open watch stream must not block close().
    const idle = net.connect(l.addresses[1]!.port, '127.0.0.1');
    await new Promise<void>((r) => idle.once('connect', () => r()));
    const W = clientConstructor('etcdserverpb.Watch');
    const w = new W(`unix:${sockPath}`, grpc.credentials.createInsecure());
    const stream = (w as unknown as { Watch(): grpc.ClientDuplexStream<unknown, unknown> }).Watch();
    stream.on('error', () => undefined);
    stream.write({ createRequest: { key: Buffer.from('k') } });
    await new Promise<void>((r) => stream.once('data', () => r()));
    const started = Date.now();
    handler.close();
    await l.close();
    expect(Date.now() - started).toBeLessThan(2000);
    g.grpcServer.forceShutdown();
    c.close();
    w.close();
    idle.destroy();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('refuses https:// with a clear error and bad URLs', async () => {
    const fake = new FakeServer();
    const g = createGrpcServer(fake, quietLog);
    const h = createHttpHandler(fake, quietLog);
    await expect(listenClientUrls(['https://127.0.0.1:0'], g.grpcServer, h, quietLog)).rejects.toThrow(/TLS key\/cert \(--cert-file, --key-file\) must be provided for client url https:\/\/127.0.0.1:0 with HTTPS scheme/);
    await expect(listenClientUrls(['http://127.0.0.1'], g.grpcServer, h, quietLog)).rejects.toThrow(/host:port/);
    g.grpcServer.forceShutdown();
  });
});
