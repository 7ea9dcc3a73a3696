// etcdserverpb.KV: validation as etcd's v3rpc layer, then the server.
import * as grpc from '@grpc/grpc-js';
import type * as pb from '../pb/types';
import type { EtcdServerApi } from '../server/types';
import {
  checkDeleteRequest,
  checkIntervals,
  checkPutRequest,
  checkRangeRequest,
  checkRequestSize,
  checkTxnRequest,
  isTxnReadOnly,
} from './validate';
import { unary, wireSizeOf } from './unary';
import { callAuth } from './auth';

export function kvService(server: EtcdServerApi): grpc.UntypedServiceImplementation {
  const maxBytes = (): number => server.limits.maxRequestBytes;
  // The hot handlers are plain functions returning the server's promise (unary() turns their
  // synchronous throws into the same gRPC errors): an async wrapper around a returned promise
  // cost one more promise and a thenable job per request.
  return {
    Range: unary<pb.RangeRequest, pb.RangeResponse>((req, call) => {
      checkRangeRequest(req);
      return server.range(req, callAuth(call), true);
    }),
    Put: unary<pb.PutRequest, pb.PutResponse>((req, call) => {
      checkPutRequest(req);
      checkRequestSize(wireSizeOf(req), maxBytes());
      return server.put(req, callAuth(call));
    }),
    DeleteRange: unary<pb.DeleteRangeRequest, pb.DeleteRangeResponse>((req, call) => {
      checkDeleteRequest(req);
      checkRequestSize(wireSizeOf(req), maxBytes());
      return server.deleteRange(req, callAuth(call));
    }),
    Txn: unary<pb.TxnRequest, pb.TxnResponse>((req, call) => {
      checkTxnRequest(req, server.limits.maxTxnOps);
      // After the op-count check, so a huge txn cannot make this quadratic walk expensive.
      checkIntervals(req.success ?? []);
      checkIntervals(req.failure ?? []);
      if (!isTxnReadOnly(req)) checkRequestSize(wireSizeOf(req), maxBytes());
      return server.txn(req, callAuth(call));
    }),
    Compact: unary<pb.CompactionRequest, pb.CompactionResponse>(async (req, call) => {
      // etcd 3.6's kvServer.Compact: only root may compact, checked before the revision (3.4 let
      // any user). Here, not in the server: the auto-compactor's calls carry no caller.
      const ctx = callAuth(call);
      server.auth?.checkAdmin(ctx);
      return server.compact(req, ctx);
    }),
  };
}
