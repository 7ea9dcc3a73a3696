// Starts the API over a FakeServer on 127.0.0.1:0 and hands out clients.
import * as grpc from '@grpc/grpc-js';
import { clientConstructor } from '../../../src/pb/load';
import { createGrpcServer, type GrpcServerOptions } from '../../../src/api/grpc_server';
import { createHttpHandler } from '../../../src/api/http';
import { listenClientUrls, type ClientListeners } from '../../../src/api/listener';
import type { ApiLogger, MetricsHook } from '../../../src/api/types';
import { FakeServer } from './fake_server';

export const quietLog: ApiLogger = {
  info: () => undefined,
  warn: () => undefined,
  error: () => undefined,
  debug: () => undefined,
};

export interface Harness {
  fake: FakeServer;
  port: number;
  endpoint: string;
  listeners: ClientListeners;
  setServing(s: boolean): void;
  client(service: string): grpc.Client;
  close(): Promise<void>;
}

export async function startHarness(
  opts: { metrics?: MetricsHook; fake?: FakeServer; grpc?: GrpcServerOptions } = {},
): Promise<Harness> {
  const fake = opts.fake ?? new FakeServer();
  const g = createGrpcServer(fake, quietLog, opts.grpc);
  const handler = createHttpHandler(fake, quietLog, { metrics: opts.metrics, checkTimeoutMs: 2000 });
  const listeners = await listenClientUrls(['http://127.0.0.1:0'], g.grpcServer, handler, quietLog);
  const port = listeners.addresses[0]!.port;
  const clients: grpc.Client[] = [];
  return {
    fake,
    port,
    endpoint: `127.0.0.1:${port}`,
    listeners,
    setServing: g.setServing,
    client(service: string): grpc.Client {
      const Ctor = clientConstructor(service);
      const c = new Ctor(`127.0.0.1:${port}`, grpc.credentials.createInsecure(), {
        'grpc.use_local_subchannel_pool': 1,
      });
      clients.push(c);
      return c;
    },
    async close(): Promise<void> {
      for (const c of clients) c.close();
      handler.close();
      g.close();
      await listeners.close();
      g.grpcServer.forceShutdown();
    },
  };
}

type UnaryFn = (req: unknown, cb: (err: grpc.ServiceError | null, res: unknown) => void) => void;

/** Calls a unary method on a generic client and resolves/rejects like a promise. */
export function call<Res = Record<string, unknown>>(client: grpc.Client, method: string, req: unknown): Promise<Res> {
  const fn = (client as unknown as Record<string, UnaryFn>)[method]!.bind(client);
  return new Promise((resolve, reject) => fn(req, (err, res) => (err ? reject(err) : resolve(res as Res))));
}

/** Waits until `pred` holds, polling; throws after `timeoutMs`. */
export async function waitFor(pred: () => boolean, timeoutMs = 5000, what = 'condition'): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!pred()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}
