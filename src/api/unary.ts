// Glue between grpc-js handler signatures and the promise-returning adapters.
import * as grpc from '@grpc/grpc-js';
import { toGrpcError } from './errors';
import type { ApiLogger } from './types';

/** A unary handler from an async function; every throw becomes a gRPC status. */
export function unary<Req, Res>(
  fn: (req: Req, call: grpc.ServerUnaryCall<Req, Res>) => Promise<Res>,
): grpc.handleUnaryCall<Req, Res> {
  return (call, callback) => {
    let p: Promise<Res>;
    try {
      p = fn(call.request, call);
    } catch (e) {
      callback(toGrpcError(e));
      return;
    }
    p.then(
      (res) => callback(null, res),
      (e: unknown) => callback(toGrpcError(e)),
    );
  };
}

/** An Unimplemented answer for RPCs whose feature has not landed yet. */
export function unimplemented<Req, Res>(name: string): grpc.handleUnaryCall<Req, Res> {
  return (_call, callback) => {
    callback({ code: grpc.status.UNIMPLEMENTED, details: `${name} is not implemented yet`, message: `${name} is not implemented yet` });
  };
}

/**
 * Where a decoded request keeps its encoded size: a property under a private symbol. (A WeakMap
 * entry per request was ~2% of a put's CPU at 100 clients, and ephemeron tables cost every
 * young-generation collection.)
 */
const WIRE_SIZE = Symbol('wireSize');
type Sized = { [WIRE_SIZE]?: number };
/** Methods whose handlers never ask wireSizeOf. */
const UNSIZED_METHODS = new Set(['Range']);

/**
 * A copy of a service definition whose request decoders remember each request's encoded
 * size, so handlers can enforce max-request-bytes without encoding the message again.
 */
export function withWireSizes(def: grpc.ServiceDefinition): grpc.ServiceDefinition {
  const out: Record<string, grpc.MethodDefinition<unknown, unknown>> = {};
  for (const [name, m] of Object.entries(def as Record<string, grpc.MethodDefinition<unknown, unknown>>)) {
    // etcd checks no size on reads: a WeakMap entry per Range was a measurable cost.
    if (UNSIZED_METHODS.has(name)) {
      out[name] = m;
      continue;
    }
    const decode = m.requestDeserialize;
    out[name] = {
      ...m,
      requestDeserialize: (bytes: Buffer): unknown => {
        const msg = decode(bytes);
        if (msg !== null && typeof msg === 'object' && Object.isExtensible(msg)) (msg as Sized)[WIRE_SIZE] = bytes.length;
        return msg;
      },
    };
  }
  return out as grpc.ServiceDefinition;
}

/** The encoded size of a request decoded through withWireSizes, if known. */
export function wireSizeOf(req: object): number | undefined {
  return (req as Sized)[WIRE_SIZE];
}

export function logStreamError(log: ApiLogger, what: string, e: unknown): void {
  const msg = e instanceof Error ? e.message : String(e);
  log.debug(`${what} stream ended with an error`, { error: msg });
}
