// grpc.health.v1.Health as etcd registers it: the empty service name reports SERVING while
// the server is healthy. etcd's standard health server answers unknown names NotFound.
import * as grpc from '@grpc/grpc-js';
import type * as pb from '../pb/types';
import { HealthCheckResponse_ServingStatus as Status } from '../pb/types';

/** The status source: true while the server should be reported SERVING. */
export type ServingProbe = () => boolean;

/** Names etcd answers for; the empty name stands for every etcd service. */
const KNOWN_SERVICES = new Set(['']);
/** How often a Health.Watch stream re-reads the probe. */
export const HEALTH_WATCH_POLL_MS = 1000;

export function healthService(isServing: ServingProbe): grpc.UntypedServiceImplementation {
  const statusOf = (): number => (isServing() ? Status.SERVING : Status.NOT_SERVING);
  return {
    Check: (
      call: grpc.ServerUnaryCall<pb.HealthCheckRequest, pb.HealthCheckResponse>,
      callback: grpc.sendUnaryData<pb.HealthCheckResponse>,
    ) => {
      if (!KNOWN_SERVICES.has(call.request.service ?? '')) {
        callback({ code: grpc.status.NOT_FOUND, details: 'unknown service', message: 'unknown service' });
        return;
      }
      callback(null, { status: statusOf() } as pb.HealthCheckResponse);
    },
    Watch: (call: grpc.ServerWritableStream<pb.HealthCheckRequest, pb.HealthCheckResponse>) => {
      const known = KNOWN_SERVICES.has(call.request.service ?? '');
      let last = -1;
      const push = (): void => {
        const s = known ? statusOf() : Status.SERVICE_UNKNOWN;
        if (s !== last) {
          last = s;
          call.write({ status: s } as pb.HealthCheckResponse);
        }
      };
      push();
      const timer = setInterval(push, HEALTH_WATCH_POLL_MS);
      timer.unref();
      const stop = (): void => clearInterval(timer);
      call.on('cancelled', stop);
      call.on('close', stop);
      call.on('error', stop);
    },
  };
}
