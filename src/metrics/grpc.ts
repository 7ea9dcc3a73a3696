// go-grpc-prometheus's server metrics, with label children created once per method.

import assert from 'node:assert';
import { Counter, Histogram, type Registry } from 'prom-client';
import { ETCD_GRPC_METHODS, GRPC_CODE_NAMES, grpcCodeName, type GrpcMethodInfo, type GrpcType } from './grpcmethods';

type CounterChild = ReturnType<Counter<string>['labels']>;
type HistogramChild = ReturnType<Histogram<string>['labels']>;

// Prometheus' default buckets, which go-grpc-prometheus uses for handling time.
const DEF_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
// A scraper pays per series; unknown method names from clients must not grow the table forever.
const MAX_METHODS = 1024;

/** Per-method handles; keep one per RPC method and call these on the hot path. */
export interface GrpcMethodMetrics {
  started(): void;
  /** `code` is the numeric gRPC status code. */
  handled(code: number, seconds?: number): void;
  msgReceived(): void;
  msgSent(): void;
}

export interface GrpcServerMetrics {
  /** The handles of one method (created and cached on first use). */
  method(service: string, method: string, type: GrpcType): GrpcMethodMetrics;
}

export function createGrpcServerMetrics(registry: Registry, opts: { handlingHistogram: boolean; preRegister: boolean }): GrpcServerMetrics {
  // Alphabetical, the order in which Go's client prints labels.
  const labels3 = ['grpc_method', 'grpc_service', 'grpc_type'];
  const started = new Counter({
    name: 'grpc_server_started_total',
    help: 'Total number of RPCs started on the server.',
    labelNames: labels3,
    registers: [registry],
  });
  const handled = new Counter({
    name: 'grpc_server_handled_total',
    help: 'Total number of RPCs completed on the server, regardless of success or failure.',
    labelNames: ['grpc_code', ...labels3],
    registers: [registry],
  });
  const received = new Counter({
    name: 'grpc_server_msg_received_total',
    help: 'Total number of RPC stream messages received on the server.',
    labelNames: labels3,
    registers: [registry],
  });
  const sent = new Counter({
    name: 'grpc_server_msg_sent_total',
    help: 'Total number of gRPC stream messages sent by the server.',
    labelNames: labels3,
    registers: [registry],
  });
  const handling = opts.handlingHistogram
    ? new Histogram({
        name: 'grpc_server_handling_seconds',
        help: 'Histogram of response latency (seconds) of gRPC that had been application-level handled by the server.',
        labelNames: labels3,
        buckets: DEF_BUCKETS,
        registers: [registry],
      })
    : undefined;

  const cache = new Map<string, GrpcMethodMetrics>();

  function make(info: GrpcMethodInfo): GrpcMethodMetrics {
    const l = [info.method, info.service, info.type];
    const startedChild: CounterChild = started.labels(...l);
    const receivedChild: CounterChild = received.labels(...l);
    const sentChild: CounterChild = sent.labels(...l);
    const handledByCode: CounterChild[] = GRPC_CODE_NAMES.map((c) => handled.labels(c, ...l));
    const handlingChild: HistogramChild | undefined = handling?.labels(...l);
    // Zero-valued series exist from the start, as go-grpc-prometheus's InitializeMetrics does.
    startedChild.inc(0);
    receivedChild.inc(0);
    sentChild.inc(0);
    for (const h of handledByCode) h.inc(0);
    handling?.zero({ grpc_method: info.method, grpc_service: info.service, grpc_type: info.type });
    return {
      started: () => startedChild.inc(),
      handled: (code, seconds) => {
        const child = handledByCode[code] ?? handled.labels(grpcCodeName(code), ...l);
        child.inc();
        if (handlingChild !== undefined && seconds !== undefined) handlingChild.observe(seconds);
      },
      msgReceived: () => receivedChild.inc(),
      msgSent: () => sentChild.inc(),
    };
  }

  const api: GrpcServerMetrics = {
    method(service, method, type) {
      const key = `${type}\u0000${service}\u0000${method}`;
      let m = cache.get(key);
      if (m === undefined) {
        assert(cache.size < MAX_METHODS, 'too many distinct gRPC methods for metrics');
        m = make({ service, method, type });
        cache.set(key, m);
      }
      return m;
    },
  };
  if (opts.preRegister) for (const info of ETCD_GRPC_METHODS) api.method(info.service, info.method, info.type);
  return api;
}
