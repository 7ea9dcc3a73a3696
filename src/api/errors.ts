// Turns anything a handler throws into the status grpc-js sends, so a bug in a lower layer
// answers one RPC with an error instead of taking the process down.
import * as grpc from '@grpc/grpc-js';
import { Code, EtcdError, isEtcdError } from '../errors';

export interface GrpcStatusError {
  code: grpc.status;
  details: string;
  message: string;
}

export function toGrpcError(e: unknown): GrpcStatusError {
  if (isEtcdError(e)) {
    return { code: e.code as number as grpc.status, details: e.message, message: e.message };
  }
  if (isStatusLike(e)) return { code: e.code, details: e.details, message: e.details };
  const msg = e instanceof Error ? e.message : String(e);
  return { code: grpc.status.UNKNOWN, details: msg, message: msg };
}

/** An error etcd answers that our shared table does not (yet) name. */
export function adHocError(code: (typeof Code)[keyof typeof Code], message: string): EtcdError {
  return new EtcdError(code, message);
}

function isStatusLike(e: unknown): e is { code: grpc.status; details: string } {
  if (e === null || typeof e !== 'object') return false;
  const o = e as { code?: unknown; details?: unknown };
  return typeof o.code === 'number' && typeof o.details === 'string';
}
