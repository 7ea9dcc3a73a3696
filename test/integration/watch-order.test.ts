// A watcher on another connection hears of a put no later than the putter hears its answer: the
// server hands the watch event to its connection before the put's response (etcd's benchmark
// measures watch latency from the put's answer, and a client that saw its write acknowledged
// expects the event to be on its way already).
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type EtcdMember, startEtcd } from '../helpers/etcd-process';
import { EtcdGrpc, StreamReader } from '../helpers/grpc';

/** Forwards one port to another and records, in one shared log, each chunk the server sends. */
async function recordingProxy(targetPort: number, label: string, log: string[], opened: { servers: net.Server[]; sockets: net.Socket[] }): Promise<number> {
  const srv = net.createServer((client) => {
    const upstream = net.connect(targetPort, '127.0.0.1');
    opened.sockets.push(client, upstream);
    client.on('error', () => upstream.destroy());
    upstream.on('error', () => client.destroy());
    client.pipe(upstream);
    upstream.on('data', (d: Buffer) => {
      log.push(label);
      client.write(d);
    });
    upstream.on('end', () => client.end());
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  opened.servers.push(srv);
  return (srv.address() as net.AddressInfo).port;
}

describe('watch events and the put that caused them', () => {
  let m: EtcdMember;
  const opened = { servers: [] as net.Server[], sockets: [] as net.Socket[] };
  beforeAll(async () => {
    m = await startEtcd();
  });
  afterAll(async () => {
    for (const s of opened.sockets) s.destroy();
    for (const s of opened.servers) s.close();
    await m.stop();
  });

  it('sends the event to the watcher before the response to the putter', async () => {
    const serverPort = Number(m.clientHostPort.split(':')[1]);
    const log: string[] = [];
    const watchPort = await recordingProxy(serverPort, 'watch', log, opened);
    const putPort = await recordingProxy(serverPort, 'put', log, opened);
    const watcher = new EtcdGrpc(`127.0.0.1:${watchPort}`);
    const putter = new EtcdGrpc(`127.0.0.1:${putPort}`);
    try {
      const stream = watcher.bidi('Watch', 'Watch');
      const reader = new StreamReader(stream);
      stream.write({ create_request: { key: Buffer.from('order/k') } });
      await reader.next(10_000); // created
      await putter.unary('KV', 'Put', { key: Buffer.from('warm'), value: Buffer.from('x') });
      const rounds = 30;
      let eventFirst = 0;
      for (let i = 0; i < rounds; i++) {
        log.length = 0;
        await putter.unary('KV', 'Put', { key: Buffer.from('order/k'), value: Buffer.from(`v${i}`) });
        const ev = await reader.next(10_000);
        expect((ev['events'] as unknown[]).length).toBe(1);
        // The first chunk on either connection after the put was sent: the server wrote both in
        // one loop turn, and the proxy's loop reads them in the order the kernel got them.
        if (log[0] === 'watch') eventFirst++;
      }
      expect(eventFirst).toBe(rounds);
      stream.end();
    } finally {
      watcher.close();
      putter.close();
    }
  });
});
