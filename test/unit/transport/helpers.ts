import * as grpc from '@grpc/grpc-js';
import { createLogger, type Logger } from '../../../src/log';
import { PeerTransport, servePeerUrls, type PeerServer, type PeerTransportOptions } from '../../../src/transport';
import type { Message } from '../../../src/raft/types';

export interface CapturedLog {
  log: Logger;
  entries(): Array<Record<string, unknown>>;
  has(msg: string): boolean;
}

export function captureLog(): CapturedLog {
  const lines: string[] = [];
  const sink = { write: (c: string) => lines.push(c), writeSync: (c: string) => lines.push(c) };
  const log = createLogger({ sinks: [sink], sampling: false, level: 'debug' });
  const entries = (): Array<Record<string, unknown>> => {
    log.flush();
    return lines
      .join('')
      .split('\n')
      .filter((l) => l.length > 0)
      .map((l) => JSON.parse(l) as Record<string, unknown>);
  };
  return { log, entries, has: (msg) => entries().some((e) => e.msg === msg) };
}

export interface Node {
  id: bigint;
  url: string;
  port: number;
  transport: PeerTransport;
  /** The peer URL's server, as bin/etcd serves it (servePeerUrls). */
  server: PeerServer;
  received: Message[];
  unreachable: bigint[];
  snapshotStatus: Array<{ id: bigint; failed: boolean }>;
  cap: CapturedLog;
}

export async function listen(server: grpc.Server, port = 0): Promise<number> {
  return new Promise((resolve, reject) =>
    server.bindAsync(`127.0.0.1:${port}`, grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
  );
}

export async function startNode(
  id: bigint,
  opts: Partial<PeerTransportOptions> & { clusterId?: bigint; port?: number } = {},
): Promise<Node> {
  const cap = captureLog();
  const received: Message[] = [];
  const unreachable: bigint[] = [];
  const snapshotStatus: Array<{ id: bigint; failed: boolean }> = [];
  const transport = new PeerTransport({
    memberId: id,
    clusterId: opts.clusterId ?? 0xc1a5n,
    log: cap.log,
    onMessage: (m) => received.push(m),
    onPeerUnreachable: (p) => unreachable.push(p),
    onSnapshotStatus: (p, failed) => snapshotStatus.push({ id: p, failed }),
    limits: { reconnectInitialMs: 20, reconnectMaxMs: 200, ...opts.limits },
    ...opts,
  });
  const server = await servePeerUrls([`http://127.0.0.1:${opts.port ?? 0}`], transport);
  const port = server.ports[0]!;
  return { id, url: `http://127.0.0.1:${port}`, port, transport, server, received, unreachable, snapshotStatus, cap };
}

export async function stopNode(n: Node): Promise<void> {
  await n.transport.stop();
  await n.server.shutdown();
}

/** Makes every node know every other one. */
export function connectAll(nodes: Node[]): void {
  for (const a of nodes) for (const b of nodes) if (a !== b) a.transport.addPeer(b.id, [b.url]);
}
