// etcdserverpb.Lease, including the keepalive stream.
import * as grpc from '@grpc/grpc-js';
import type * as pb from '../pb/types';
import { Errors, isEtcdError } from '../errors';
import type { EtcdServerApi } from '../server/types';
import { toGrpcError } from './errors';
import type { ApiLogger } from './types';
import { checkRequestSize } from './validate';
import { unary, wireSizeOf } from './unary';
import { callAuth } from './auth';

/**
 * Keepalives queued on one stream before we stop reading from it. HTTP/2 flow control
 * then pushes back on the client; etcd itself handles one keepalive at a time.
 */
export const MAX_PENDING_KEEPALIVES_PER_STREAM = 64;

function isLeaseNotFound(e: unknown): boolean {
  return isEtcdError(e) && e.message === Errors.LeaseNotFound.message;
}

export function leaseService(server: EtcdServerApi, log: ApiLogger): grpc.UntypedServiceImplementation {
  return {
    LeaseGrant: unary<pb.LeaseGrantRequest, pb.LeaseGrantResponse>(async (req, call) => {
      checkRequestSize(wireSizeOf(req), server.limits.maxRequestBytes);
      return server.leaseGrant(req, callAuth(call));
    }),
    LeaseRevoke: unary<pb.LeaseRevokeRequest, pb.LeaseRevokeResponse>(async (req, call) => server.leaseRevoke(req, callAuth(call))),
    LeaseTimeToLive: unary<pb.LeaseTimeToLiveRequest, pb.LeaseTimeToLiveResponse>(async (req, call) => {
      try {
        return await server.leaseTimeToLive(req, callAuth(call));
      } catch (e) {
        // etcd answers an unknown lease with TTL -1 rather than an error.
        if (!isLeaseNotFound(e)) throw e;
        return { header: server.header(), ID: req.ID, TTL: '-1', grantedTTL: '0', keys: [] } as pb.LeaseTimeToLiveResponse;
      }
    }),
    LeaseLeases: unary<pb.LeaseLeasesRequest, pb.LeaseLeasesResponse>(async (req, call) => {
      try {
        return await server.leaseLeases(req, callAuth(call));
      } catch (e) {
        if (!isLeaseNotFound(e)) throw e;
        return { header: server.header(), leases: [] } as pb.LeaseLeasesResponse;
      }
    }),
    LeaseKeepAlive: (call: grpc.ServerDuplexStream<pb.LeaseKeepAliveRequest, pb.LeaseKeepAliveResponse>) =>
      runKeepAliveStream(server, log, call),
  };
}

/** Answers keepalives strictly in arrival order, one renewal at a time per stream. */
function runKeepAliveStream(
  server: EtcdServerApi,
  log: ApiLogger,
  call: grpc.ServerDuplexStream<pb.LeaseKeepAliveRequest, pb.LeaseKeepAliveResponse>,
): void {
  const queue: pb.LeaseKeepAliveRequest[] = [];
  // The stream's caller, checked again at each keepalive as etcd's LeaseRenew does.
  const ctx = callAuth(call);
  let working = false;
  let done = false;
  let paused = false;
  let inputEnded = false;

  const finish = (err?: unknown): void => {
    if (done) return;
    done = true;
    queue.length = 0;
    if (err !== undefined) {
      call.emit('error', toGrpcError(err));
    } else {
      call.end();
    }
  };

  const pump = async (): Promise<void> => {
    if (working) return;
    working = true;
    try {
      while (!done && queue.length > 0) {
        const req = queue.shift()!;
        if (paused && queue.length < MAX_PENDING_KEEPALIVES_PER_STREAM / 2) {
          paused = false;
          call.resume();
        }
        let resp: pb.LeaseKeepAliveResponse;
        try {
          resp = await server.leaseKeepAlive(req, ctx);
        } catch (e) {
          if (!isLeaseNotFound(e)) {
            finish(e);
            return;
          }
          resp = { header: server.header(), ID: req.ID, TTL: '0' } as pb.LeaseKeepAliveResponse;
        }
        if (done) return;
        if (!call.write(resp)) {
          await new Promise<void>((resolve) => {
            const onDone = (): void => {
              call.off('drain', onDone);
              call.off('close', onDone);
              resolve();
            };
            call.on('drain', onDone);
            call.on('close', onDone);
          });
        }
      }
      if (inputEnded && queue.length === 0) finish();
    } finally {
      working = false;
    }
  };

  call.on('data', (req: pb.LeaseKeepAliveRequest) => {
    if (done) return;
    queue.push(req);
    if (queue.length > 2 * MAX_PENDING_KEEPALIVES_PER_STREAM) {
      // pause() should have stopped delivery long before this; never let the queue grow.
      finish({ code: grpc.status.RESOURCE_EXHAUSTED, details: 'too many pending lease keepalives' });
      return;
    }
    if (!paused && queue.length >= MAX_PENDING_KEEPALIVES_PER_STREAM) {
      paused = true;
      call.pause();
    }
    void pump();
  });
  call.on('end', () => {
    inputEnded = true;
    if (!working && queue.length === 0) finish();
  });
  call.on('error', (e: unknown) => {
    log.debug('lease keepalive stream error', { error: e instanceof Error ? e.message : String(e) });
    done = true;
    queue.length = 0;
  });
  call.on('cancelled', () => {
    done = true;
    queue.length = 0;
  });
}
