// etcdserverpb.Maintenance, including the snapshot stream.
import * as grpc from '@grpc/grpc-js';
import type * as pb from '../pb/types';
import { AlarmRequest_AlarmAction } from '../pb/types';
import type { EtcdServerApi } from '../server/types';
import { toGrpcError } from './errors';
import type { ApiLogger } from './types';
import { unary, unimplemented } from './unary';
import { callAuth } from './auth';

export function maintenanceService(server: EtcdServerApi, log: ApiLogger): grpc.UntypedServiceImplementation {
  return {
    Alarm: unary<pb.AlarmRequest, pb.AlarmResponse>(async (req, call) => {
      // etcd 3.6's authMaintenanceServer: any user may list the alarms, only root may raise or
      // clear one. Here, not in the server: its own calls (/health, /metrics) carry no caller.
      const ctx = callAuth(call);
      if (req.action === AlarmRequest_AlarmAction.GET) server.auth?.requireUser(ctx);
      else server.auth?.checkAdmin(ctx);
      return server.alarm(req, ctx);
    }),
    Status: unary<pb.StatusRequest, pb.StatusResponse>(async (req, call) => {
      server.auth?.requireUser(callAuth(call));
      return server.status(req);
    }),
    Defragment: unary<pb.DefragmentRequest, pb.DefragmentResponse>(async (req, call) => server.defragment(req, callAuth(call))),
    Hash: unary<pb.HashRequest, pb.HashResponse>(async (req, call) => server.hash(req, callAuth(call))),
    HashKV: unary<pb.HashKVRequest, pb.HashKVResponse>(async (req, call) => server.hashKV(req, callAuth(call))),
    MoveLeader: unary<pb.MoveLeaderRequest, pb.MoveLeaderResponse>(async (req, call) => server.moveLeader(req, callAuth(call))),
    Downgrade: unimplemented<pb.DowngradeRequest, pb.DowngradeResponse>('Downgrade'),
    Snapshot: (call: grpc.ServerWritableStream<pb.SnapshotRequest, pb.SnapshotResponse>) => {
      void streamSnapshot(server, log, call);
    },
  };
}

/** Streams the server's chunks, waiting for 'drain' so at most one chunk sits buffered. */
async function streamSnapshot(
  server: EtcdServerApi,
  log: ApiLogger,
  call: grpc.ServerWritableStream<pb.SnapshotRequest, pb.SnapshotResponse>,
): Promise<void> {
  let gone = false;
  const onGone = (): void => {
    gone = true;
  };
  call.on('cancelled', onGone);
  call.on('close', onGone);
  const it = server.snapshot(callAuth(call))[Symbol.asyncIterator]();
  let sentBytes = 0;
  try {
    log.info('sending database snapshot to client');
    for (;;) {
      const next = await it.next();
      if (next.done) break;
      if (gone) break;
      sentBytes += next.value.blob?.length ?? 0;
      if (!call.write(next.value)) {
        await new Promise<void>((resolve) => {
          const done = (): void => {
            call.off('drain', done);
            call.off('cancelled', done);
            call.off('close', done);
            resolve();
          };
          call.on('drain', done);
          call.on('cancelled', done);
          call.on('close', done);
        });
      }
    }
    if (gone) {
      log.warn('snapshot client went away', { 'sent-bytes': sentBytes });
      await it.return?.();
      return;
    }
    log.info('successfully sent database snapshot to client', { 'total-bytes': sentBytes });
    call.end();
  } catch (e) {
    log.warn('failed to send database snapshot', { error: e instanceof Error ? e.message : String(e) });
    try {
      await it.return?.();
    } catch {
      // Already failing; the client gets the first error.
    }
    if (!gone) call.emit('error', toGrpcError(e));
  }
}
