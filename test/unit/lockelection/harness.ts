// A grpc-js server on port 0 serving our Lock and Election services over the fake store,
// and a promise-based client for them.
import * as grpc from '@grpc/grpc-js';
import { createElectionService } from '../../../src/api/v3election';
import { createLockService } from '../../../src/api/v3lock';
import { clientConstructor, serviceDefinition } from '../../../src/pb/load';
import { FakeEtcd, fakeApi } from './fake-api';

export interface CallError {
  code: number;
  details: string;
}

type UnaryMethod = (req: object, opts: grpc.CallOptions, cb: (err: grpc.ServiceError | null, res: unknown) => void) => void;

export interface Harness {
  fake: FakeEtcd;
  /** Resolves with the response, or with {code, details} when the call fails. */
  call<T>(service: 'lock' | 'election', method: string, req: object, deadlineMs?: number): Promise<T | CallError>;
  observe(req: object): grpc.ClientReadableStream<unknown>;
  close(): Promise<void>;
}

export async function startHarness(): Promise<Harness> {
  const fake = new FakeEtcd();
  const api = fakeApi(fake);
  const server = new grpc.Server();
  server.addService(serviceDefinition('v3lockpb.Lock'), createLockService(api));
  server.addService(serviceDefinition('v3electionpb.Election'), createElectionService(api));
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
  );
  const addr = `127.0.0.1:${port}`;
  const creds = grpc.credentials.createInsecure();
  const clients = {
    lock: new (clientConstructor('v3lockpb.Lock'))(addr, creds),
    election: new (clientConstructor('v3electionpb.Election'))(addr, creds),
  };
  return {
    fake,
    call<T>(service: 'lock' | 'election', method: string, req: object, deadlineMs = 5000): Promise<T | CallError> {
      const client = clients[service] as unknown as Record<string, UnaryMethod>;
      return new Promise((resolve) => {
        client[method].call(client, req, { deadline: Date.now() + deadlineMs }, (err, res) =>
          resolve(err ? { code: err.code, details: err.details } : (res as T)),
        );
      });
    },
    observe(req: object): grpc.ClientReadableStream<unknown> {
      const client = clients.election as unknown as { Observe(req: object): grpc.ClientReadableStream<unknown> };
      return client.Observe(req);
    },
    async close(): Promise<void> {
      clients.lock.close();
      clients.election.close();
      await new Promise<void>((resolve) => server.tryShutdown(() => resolve()));
    },
  };
}

export function isError(x: unknown): x is CallError {
  return typeof x === 'object' && x !== null && 'code' in x && 'details' in x;
}

/** Poll `check` until it is true; fail after `timeoutMs`. */
export async function waitFor(check: () => boolean, timeoutMs = 3000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 5));
  }
}
