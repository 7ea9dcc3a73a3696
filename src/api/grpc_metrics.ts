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
import { Counter } from 'prom-client';
import type { EtcdMetrics, GrpcMethodMetrics, GrpcType } from '../metrics';
import { grpcCodeName } from '../metrics/grpcmethods';
import { FAST_CALL_TRACKER, type CallTracker } from './fast_common';
import type { EncodedParts, PartsSerializer } from '../pb/wire';

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

/** What a call reports to; either prom-client directly or counts flushed before a scrape. */
interface MethodSink {
  started(): void;
  handled(code: number, seconds?: number): void;
  msgReceived(): void;
  msgSent(): void;
}

/**
 * Counts of one method kept as plain numbers on the hot path: a labelled prom-client inc
 * hashes its labels every time (~1 µs, four or more per call). Added to the series before
 * every scrape, so a scrape sees exactly what per-call increments would have shown.
 */
class PendingCounts implements MethodSink {
  startedN = 0;
  receivedN = 0;
  sentN = 0;
  /** By gRPC status code (0..16; anything else is rare and goes in `otherCodes`). */
  readonly handledN: number[] = new Array<number>(17).fill(0);
  readonly otherCodes = new Map<number, number>();

  started(): void {
    this.startedN++;
  }
  handled(code: number): void {
    if (code >= 0 && code < 17) this.handledN[code]++;
    else this.otherCodes.set(code, (this.otherCodes.get(code) ?? 0) + 1);
  }
  msgReceived(): void {
    this.receivedN++;
  }
  msgSent(): void {
    this.sentN++;
  }
}

interface MethodEntry {
  readonly service: string;
  readonly method: string;
  readonly type: GrpcType;
  /** Created on first use, so methods etcd does not pre-register appear only once called. */
  metrics: GrpcMethodMetrics | undefined;
  /** Set when counts are batched (see PendingCounts). */
  pending: PendingCounts | undefined;
}

export class CallRecord {
  private begun = false;
  private done = false;
  /** Messages received before the handler began (the request of a unary call). */
  private receivedEarly = 0;
  private startMs = 0;

  constructor(
    private readonly m: MethodSink,
    private readonly path: string,
    private readonly timed: boolean,
  ) {}

  begin(): void {
    if (this.begun || this.done) return;
    this.begun = true;
    if (this.timed) this.startMs = performance.now();
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
    if (this.begun) this.m.handled(code, this.timed ? (performance.now() - this.startMs) / 1000 : undefined);
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
  /** What the interceptor does, for a call answered without grpc-js's call machinery (fast_unary.ts, fast_stream.ts). */
  track(path: string): CallRecord | undefined;
}

/** A handler's call as the metrics wrapper sees it: grpc-js's, or a direct path's (fast_common.ts). */
interface InstrumentedCall {
  readonly metadata: grpc.Metadata;
  readonly [FAST_CALL_TRACKER]?: CallTracker | undefined;
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

/**
 * A call's record rides on its Metadata object (grpc-js hands the same object from the
 * interceptor to the handler) under a private symbol: a WeakMap entry per call cost more.
 */
const RECORD = Symbol('grpcMetricsCallRecord');

function linkRecord(md: grpc.Metadata, rec: CallRecord): void {
  (md as unknown as Record<symbol, CallRecord | undefined>)[RECORD] = rec;
}

function recordOf(md: grpc.Metadata): CallRecord | undefined {
  return (md as unknown as Record<symbol, CallRecord | undefined>)[RECORD];
}

/** The go-grpc-prometheus counters by name, when the registry has all of them as Counters. */
function batchableCounters(metrics: EtcdMetrics): { started: Counter; handled: Counter; received: Counter; sent: Counter } | undefined {
  // The handling-time histogram (--metrics=extensive) is observed per call: keep per-call counting then.
  if (metrics.registry.getSingleMetric('grpc_server_handling_seconds') !== undefined) return undefined;
  const get = (name: string): Counter | undefined => {
    const m = metrics.registry.getSingleMetric(name);
    return m instanceof Counter ? m : undefined;
  };
  const started = get('grpc_server_started_total');
  const handled = get('grpc_server_handled_total');
  const received = get('grpc_server_msg_received_total');
  const sent = get('grpc_server_msg_sent_total');
  if (!started || !handled || !received || !sent) return undefined;
  return { started, handled, received, sent };
}

export function createGrpcInstrumentation(metrics: EtcdMetrics): GrpcInstrumentation {
  const methods = new Map<string, MethodEntry>();
  const sentBytesCounter = metrics.network.clientGrpcSentBytes;
  const receivedBytesCounter = metrics.network.clientGrpcReceivedBytes;
  let sentBytes = 0;
  let receivedBytes = 0;
  let counters = batchableCounters(metrics);
  const timed = counters === undefined;

  const flush = (): void => {
    if (sentBytes > 0) sentBytesCounter.inc(sentBytes);
    if (receivedBytes > 0) receivedBytesCounter.inc(receivedBytes);
    sentBytes = 0;
    receivedBytes = 0;
    if (counters === undefined) return;
    for (const e of methods.values()) {
      const p = e.pending;
      if (p === undefined) continue;
      const labels = { grpc_method: e.method, grpc_service: e.service, grpc_type: e.type };
      if (p.startedN > 0) counters.started.inc(labels, p.startedN);
      if (p.receivedN > 0) counters.received.inc(labels, p.receivedN);
      if (p.sentN > 0) counters.sent.inc(labels, p.sentN);
      p.startedN = 0;
      p.receivedN = 0;
      p.sentN = 0;
      for (let code = 0; code < p.handledN.length; code++) {
        if (p.handledN[code] === 0) continue;
        counters.handled.inc({ ...labels, grpc_code: grpcCodeName(code) }, p.handledN[code]);
        p.handledN[code] = 0;
      }
      for (const [code, n] of p.otherCodes) counters.handled.inc({ ...labels, grpc_code: grpcCodeName(code) }, n);
      p.otherCodes.clear();
    }
  };
  try {
    metrics.beforeScrape(flush);
  } catch {
    // No room for another scrape hook: count per call instead (bytes included).
    counters = undefined;
  }
  const batched = counters !== undefined;

  const sinkOf = (entry: MethodEntry): MethodSink => {
    // Creating the method's handles also creates its zero-valued series.
    entry.metrics ??= metrics.grpc.method(entry.service, entry.method, entry.type);
    if (!batched) return entry.metrics;
    entry.pending ??= new PendingCounts();
    return entry.pending;
  };

  const interceptor: grpc.ServerInterceptor = (desc, call) => {
    const entry = methods.get(desc.path);
    // Not one of ours (cannot happen: grpc-js answers unknown paths before interceptors).
    if (entry === undefined) return new grpc.ServerInterceptingCall(call);
    const rec = new CallRecord(sinkOf(entry), desc.path, timed);
    return new grpc.ServerInterceptingCall(call, {
      start: (next) => {
        next({
          onReceiveMetadata: (md, nextMd) => {
            linkRecord(md, rec);
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
      methods.set(m.path, { service: serviceName, method, type: grpcTypeOf(m), metrics: undefined, pending: undefined });
      const decode = m.requestDeserialize;
      const encode = m.responseSerialize as PartsSerializer;
      const countSent = (bytes: number): void => {
        if (batched) sentBytes += bytes;
        else sentBytesCounter.inc(bytes);
      };
      const serialize: PartsSerializer = (value: unknown): Buffer => {
        const b = encode(value);
        countSent(b.length);
        return b;
      };
      const encodeParts = encode.parts;
      if (encodeParts !== undefined) {
        serialize.parts = (value: unknown): EncodedParts | null => {
          const p = encodeParts(value);
          if (p !== null) countSent(p.bytes);
          return p;
        };
      }
      out[name] = {
        ...m,
        requestDeserialize: (bytes: Buffer): unknown => {
          if (batched) receivedBytes += bytes.length;
          else receivedBytesCounter.inc(bytes.length);
          return decode(bytes);
        },
        responseSerialize: serialize,
      };
    }
    return out as grpc.ServiceDefinition;
  };

  const instrumentImpl = (impl: grpc.UntypedServiceImplementation): grpc.UntypedServiceImplementation => {
    const out: grpc.UntypedServiceImplementation = {};
    for (const [name, h] of Object.entries(impl)) {
      const handler = h as unknown as (call: InstrumentedCall, ...rest: unknown[]) => void;
      out[name] = ((call: InstrumentedCall, ...rest: unknown[]) => {
        // A direct path's call carries its tracker; reading `metadata` there would build one.
        if (FAST_CALL_TRACKER in call) call[FAST_CALL_TRACKER]?.begin();
        else recordOf(call.metadata)?.begin();
        handler(call, ...rest);
      }) as unknown as grpc.UntypedHandleCall;
    }
    return out;
  };

  const track = (path: string): CallRecord | undefined => {
    const entry = methods.get(path);
    if (entry === undefined) return undefined;
    return new CallRecord(sinkOf(entry), path, timed);
  };

  return { interceptor, instrumentDefinition, instrumentImpl, track };
}
