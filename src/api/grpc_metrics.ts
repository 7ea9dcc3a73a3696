// go-grpc-prometheus's server metrics and etcd's client gRPC byte counters on grpc-js.
//
// etcd chains its own interceptor (learner / require-leader checks) before the Prometheus
// one, so a call refused by those checks is never counted. To match, a call counts as started
// only when its handler actually begins (`instrumentImpl`, wrapped inside the checks); the
// grpc-js interceptor links to it through the request Metadata object, which grpc-js hands
// unchanged from the interceptor to the handler, and records messages and the final status.
import assert from 'node:assert';
import { performance } from 'node:perf_hooks';
import * as grpc from '@grpc/grpc-js';
import type { EtcdMetrics, GrpcMethodMetrics, GrpcType } from '../metrics';

/** grpc.status codes under the names grpc-js exports, used where etcd's handlers differ. */
const CANCELLED = grpc.status.CANCELLED;
const DEADLINE_EXCEEDED = grpc.status.DEADLINE_EXCEEDED;
const UNAVAILABLE = grpc.status.UNAVAILABLE;

/**
 * The code etcd's handler returns when the client goes away mid-call. etcd's LeaseKeepAlive
 * turns a cancelled context into "no leader" (Unavailable); the other handlers end with
 * the cancellation itself.
 */
function codeOnClientCancel(path: string): number {
  return path === '/etcdserverpb.Lease/LeaseKeepAlive' ? UNAVAILABLE : CANCELLED;
}

/** Registered services have a few dozen methods; this only guards against misuse. */
const MAX_METHODS = 512;

interface MethodEntry {
  readonly service: string;
  readonly method: string;
  readonly type: GrpcType;
  /** Created on first use, so methods etcd does not pre-register appear only once called. */
  metrics: GrpcMethodMetrics | undefined;
}

export class CallRecord {
  private begun = false;
  private done = false;
  /** Messages received before the handler began (the request of a unary call). */
  private receivedEarly = 0;
  private startMs = 0;

  constructor(
    private readonly m: GrpcMethodMetrics,
    private readonly path: string,
  ) {}

  begin(): void {
    if (this.begun || this.done) return;
    this.begun = true;
    this.startMs = performance.now();
    this.m.started();
    for (; this.receivedEarly > 0; this.receivedEarly--) this.m.msgReceived();
  }

  received(): void {
    if (this.begun) this.m.msgReceived();
    else if (!this.done) this.receivedEarly++;
  }

  sent(): void {
    if (this.begun && !this.done) this.m.msgSent();
  }

  finish(code: number): void {
    if (this.done) return;
    this.done = true;
    if (this.begun) this.m.handled(code, (performance.now() - this.startMs) / 1000);
  }

  cancelled(deadlinePassed: boolean): void {
    this.finish(deadlinePassed ? DEADLINE_EXCEEDED : codeOnClientCancel(this.path));
  }
}

export interface GrpcInstrumentation {
  /** Pass in grpc.ServerOptions.interceptors. */
  readonly interceptor: grpc.ServerInterceptor;
  /**
   * Registers a service's methods for metrics and returns its definition with encoders that
   * count wire bytes (etcd counts every message its codec marshals or unmarshals).
   */
  instrumentDefinition(serviceName: string, def: grpc.ServiceDefinition): grpc.ServiceDefinition;
  /** Wraps handlers so a call counts as started when its handler begins. Wrap inside etcd's checks. */
  instrumentImpl(impl: grpc.UntypedServiceImplementation): grpc.UntypedServiceImplementation;
  /** What the interceptor does, for a call answered without grpc-js's call machinery (fast_unary.ts). */
  track(path: string, md: grpc.Metadata): CallRecord | undefined;
}

function grpcTypeOf(m: { requestStream: boolean; responseStream: boolean }): GrpcType {
  if (m.requestStream) return m.responseStream ? 'bidi_stream' : 'client_stream';
  return m.responseStream ? 'server_stream' : 'unary';
}

function deadlinePassed(call: grpc.ServerInterceptingCallInterface): boolean {
  const d = call.getDeadline();
  const ms = d instanceof Date ? d.getTime() : d;
  return Number.isFinite(ms) && ms <= Date.now();
}

export function createGrpcInstrumentation(metrics: EtcdMetrics): GrpcInstrumentation {
  const methods = new Map<string, MethodEntry>();
  const records = new WeakMap<grpc.Metadata, CallRecord>();
  const sentBytes = metrics.network.clientGrpcSentBytes;
  const receivedBytes = metrics.network.clientGrpcReceivedBytes;

  const interceptor: grpc.ServerInterceptor = (desc, call) => {
    const entry = methods.get(desc.path);
    // Not one of ours (cannot happen: grpc-js answers unknown paths before interceptors).
    if (entry === undefined) return new grpc.ServerInterceptingCall(call);
    entry.metrics ??= metrics.grpc.method(entry.service, entry.method, entry.type);
    const rec = new CallRecord(entry.metrics, desc.path);
    return new grpc.ServerInterceptingCall(call, {
      start: (next) => {
        next({
          onReceiveMetadata: (md, nextMd) => {
            records.set(md, rec);
            nextMd(md);
          },
          onReceiveMessage: (msg, nextMsg) => {
            rec.received();
            nextMsg(msg);
          },
          onCancel: () => rec.cancelled(deadlinePassed(call)),
        });
      },
      sendMessage: (msg, next) => {
        rec.sent();
        next(msg);
      },
      sendStatus: (status, next) => {
        rec.finish(status.code);
        next(status);
      },
    });
  };

  const instrumentDefinition = (serviceName: string, def: grpc.ServiceDefinition): grpc.ServiceDefinition => {
    const out: Record<string, grpc.MethodDefinition<unknown, unknown>> = {};
    for (const [name, m] of Object.entries(def as Record<string, grpc.MethodDefinition<unknown, unknown>>)) {
      // The path ("/pkg.Service/Method") carries the proto's method name, as Go reports it.
      const method = m.path.slice(m.path.lastIndexOf('/') + 1);
      assert(methods.size < MAX_METHODS, 'too many gRPC methods to instrument');
      methods.set(m.path, { service: serviceName, method, type: grpcTypeOf(m), metrics: undefined });
      const decode = m.requestDeserialize;
      const encode = m.responseSerialize;
      out[name] = {
        ...m,
        requestDeserialize: (bytes: Buffer): unknown => {
          receivedBytes.inc(bytes.length);
          return decode(bytes);
        },
        responseSerialize: (value: unknown): Buffer => {
          const b = encode(value);
          sentBytes.inc(b.length);
          return b;
        },
      };
    }
    return out as grpc.ServiceDefinition;
  };

  const instrumentImpl = (impl: grpc.UntypedServiceImplementation): grpc.UntypedServiceImplementation => {
    const out: grpc.UntypedServiceImplementation = {};
    for (const [name, h] of Object.entries(impl)) {
      const handler = h as unknown as (call: { metadata: grpc.Metadata }, ...rest: unknown[]) => void;
      out[name] = ((call: { metadata: grpc.Metadata }, ...rest: unknown[]) => {
        records.get(call.metadata)?.begin();
        handler(call, ...rest);
      }) as unknown as grpc.UntypedHandleCall;
    }
    return out;
  };

  const track = (path: string, md: grpc.Metadata): CallRecord | undefined => {
    const entry = methods.get(path);
    if (entry === undefined) return undefined;
    entry.metrics ??= metrics.grpc.method(entry.service, entry.method, entry.type);
    const rec = new CallRecord(entry.metrics, path);
    records.set(md, rec);
    return rec;
  };

  return { interceptor, instrumentDefinition, instrumentImpl, track };
}
