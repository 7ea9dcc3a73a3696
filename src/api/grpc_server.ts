// Builds the grpc-js server with every etcd service, configured as etcd configures its own
// (etcdserver/api/v3rpc/grpc.go, embed/etcd.go).
import * as grpc from '@grpc/grpc-js';
import { serviceDefinition } from '../pb/load';
import { withFastCodecs } from '../pb/service_codecs';
import type { EtcdServerApi } from '../server/types';
import { authService } from './auth';
import { clusterService } from './cluster';
import { healthService } from './health';
import { kvService } from './kv';
import { leaseService } from './lease';
import { maintenanceService } from './maintenance';
import type { ApiLogger } from './types';
import { toGrpcError } from './errors';
import { MemberState, type MemberStateOptions } from './member_state';
import { withWireSizes } from './unary';
import { createGrpcInstrumentation } from './grpc_metrics';
import type { EtcdMetrics } from '../metrics';
import { createElectionService } from './v3election';
import { createLockService } from './v3lock';
import { watchService, GRPC_OVERHEAD_BYTES } from './watch';
import { installFastRoutes } from './fast_common';
import { grpcGoDetails } from './grpc_go_texts';
import { rewriteGrpcJsStatus } from '../grpcjs/stream_hook';
import { fastUnaryRoutes } from './fast_unary';
import { fastStreamRoutes } from './fast_stream';

/** The unary methods that carry most of the load, answered without grpc-js's per-call machinery. */
const FAST_UNARY_PATHS = ['/etcdserverpb.KV/Range', '/etcdserverpb.KV/Put', '/etcdserverpb.KV/DeleteRange', '/etcdserverpb.KV/Txn'];
/** The bidi streams that carry most messages, likewise (fast_stream.ts). */
const FAST_STREAM_PATHS = ['/etcdserverpb.Watch/Watch', '/etcdserverpb.Lease/LeaseKeepAlive'];
/** etcd's API label of etcd_network_server_stream_failures_total and its warning, per stream method. */
const STREAM_FAILURE_API: Readonly<Record<string, { api: string; what: string }>> = {
  '/etcdserverpb.Watch/Watch': { api: 'watch', what: 'watch request' },
  '/etcdserverpb.Lease/LeaseKeepAlive': { api: 'lease-keepalive', what: 'lease keepalive request' },
};

/** etcd's maxSendBytes (math.MaxInt32). */
export const MAX_SEND_BYTES = 2 ** 31 - 1;
/** etcd's --grpc-keepalive-interval and --grpc-keepalive-timeout defaults. */
export const DEFAULT_KEEPALIVE_INTERVAL_MS = 2 * 60 * 60 * 1000;
export const DEFAULT_KEEPALIVE_TIMEOUT_MS = 20 * 1000;

export interface GrpcServerOptions {
  keepaliveIntervalMs?: number;
  keepaliveTimeoutMs?: number;
  /** etcd's --max-concurrent-streams; unset leaves grpc-js's default (no limit). */
  maxConcurrentStreams?: number;
  /** Learner / require-leader checks (etcd's interceptors); see member_state.ts. */
  memberState?: MemberStateOptions;
  /** go-grpc-prometheus series and etcd's client gRPC byte counters; unset records nothing. */
  metrics?: EtcdMetrics;
}

export interface EtcdGrpcServer {
  grpcServer: grpc.Server;
  /** Health service status for the empty service name ("" = all of etcd). */
  setServing(serving: boolean): void;
  /** Full names of the registered services. */
  services: string[];
  /** Stops the leader monitor timer. */
  close(): void;
}

export function grpcServerOptions(maxRequestBytes: number, opts: GrpcServerOptions = {}): grpc.ServerOptions {
  const o: grpc.ServerOptions = {
    // Bigger than the request limit so oversized requests reach our check and get etcd's
    // "request is too large" instead of a transport error.
    'grpc.max_receive_message_length': maxRequestBytes + GRPC_OVERHEAD_BYTES,
    'grpc.max_send_message_length': MAX_SEND_BYTES,
    'grpc.keepalive_time_ms': opts.keepaliveIntervalMs ?? DEFAULT_KEEPALIVE_INTERVAL_MS,
    'grpc.keepalive_timeout_ms': opts.keepaliveTimeoutMs ?? DEFAULT_KEEPALIVE_TIMEOUT_MS,
    // etcd serves no channelz; grpc-js's per-call channelz bookkeeping is pure cost.
    'grpc.enable_channelz': 0,
  };
  if (opts.maxConcurrentStreams !== undefined) o['grpc.max_concurrent_streams'] = opts.maxConcurrentStreams;
  return o;
}

/** A grpc-js Server with etcd's services registered (not yet listening: see listener.ts). */
export function createGrpcServer(server: EtcdServerApi, log: ApiLogger, opts: GrpcServerOptions = {}): EtcdGrpcServer {
  const instr = opts.metrics ? createGrpcInstrumentation(opts.metrics) : undefined;
  const serverOpts = grpcServerOptions(server.limits.maxRequestBytes, opts);
  if (instr) serverOpts.interceptors = [instr.interceptor];
  const grpcServer = new grpc.Server(serverOpts);
  let serving = true;
  const services: string[] = [];
  const metrics = opts.metrics;
  const member = new MemberState(server, log, {
    ...opts.memberState,
    onClientRequests: metrics ? (type, version, n) => metrics.server.clientRequests.inc({ type, client_api_version: version }, n) : undefined,
  });
  metrics?.beforeScrape(() => member.flushClientCounts());
  const add = (name: string, impl: grpc.UntypedServiceImplementation, sized = false): void => {
    // The hot KV and watch messages skip protobufjs's object conversion (src/pb/service_codecs.ts).
    const def = withFastCodecs(name, serviceDefinition(name));
    // Metrics count a call only once it passes etcd's checks (see grpc_metrics.ts).
    const counted = instr ? instr.instrumentImpl(impl) : impl;
    // The health service answers whatever the member's state, as in etcd.
    const guarded = name === 'grpc.health.v1.Health' ? counted : guard(def, counted, member);
    const wireDef = sized ? withWireSizes(def) : def;
    grpcServer.addService(instr ? instr.instrumentDefinition(name, wireDef) : wireDef, guarded);
    services.push(name);
  };

  add('etcdserverpb.KV', kvService(server), true);
  add('etcdserverpb.Watch', watchService(server, log));
  add('etcdserverpb.Lease', leaseService(server, log), true);
  add('etcdserverpb.Cluster', clusterService(server));
  add('etcdserverpb.Maintenance', maintenanceService(server, log));
  add('etcdserverpb.Auth', authService(server));
  add('grpc.health.v1.Health', healthService(() => serving));
  add('v3lockpb.Lock', createLockService(server));
  add('v3electionpb.Election', createElectionService(server));
  const maxReceiveBytes = serverOpts['grpc.max_receive_message_length'] as number;
  const track = instr ? (p: string) => instr.track(p) : undefined;
  // Before the fast routes' hook, so that it sees only the calls grpc-js answers itself.
  rewriteGrpcJsStatus(grpcServer, grpcGoDetails);
  installFastRoutes(grpcServer, [
    ...fastUnaryRoutes({ paths: FAST_UNARY_PATHS, maxReceiveBytes, track }),
    ...fastStreamRoutes({
      paths: FAST_STREAM_PATHS,
      maxReceiveBytes,
      maxSendBytes: MAX_SEND_BYTES,
      track,
      onReceiveFailure: (path, details) => {
        const f = STREAM_FAILURE_API[path];
        if (f === undefined) return;
        log.warn(`failed to receive ${f.what} from gRPC stream`, { error: details });
        metrics?.network.serverStreamFailures.inc({ Type: 'receive', API: f.api });
      },
    }),
  ]);
  return {
    grpcServer,
    setServing: (s) => {
      serving = s;
    },
    services,
    close: () => member.close(),
  };
}

type AnyHandler = (...args: unknown[]) => void;

/** Wraps every handler with etcd's interceptor checks (learner, require-leader). */
function guard(
  def: grpc.ServiceDefinition,
  impl: grpc.UntypedServiceImplementation,
  member: MemberState,
): grpc.UntypedServiceImplementation {
  const out: grpc.UntypedServiceImplementation = {};
  for (const [name, h] of Object.entries(impl)) {
    const m = (def as Record<string, grpc.MethodDefinition<unknown, unknown> | undefined>)[name];
    const handler = h as unknown as AnyHandler;
    if (!m || (m.requestStream === false && m.responseStream === false)) {
      out[name] = ((call: grpc.ServerUnaryCall<unknown, unknown>, cb: grpc.sendUnaryData<unknown>) => {
        const err = member.checkUnary(call.request, name, call);
        if (err) return cb(toGrpcError(err));
        handler(call, cb);
      }) as grpc.UntypedHandleCall;
    } else {
      out[name] = ((call: grpc.ServerDuplexStream<unknown, unknown>) => {
        const err = member.checkStream(call, name);
        if (err) {
          call.emit('error', toGrpcError(err));
          return;
        }
        handler(call);
      }) as grpc.UntypedHandleCall;
    }
  }
  return out;
}
