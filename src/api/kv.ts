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
  return {
    Range: unary<pb.RangeRequest, pb.RangeResponse>(async (req, call) => {
      checkRangeRequest(req);
      return server.range(req, callAuth(call));
    }),
    Put: unary<pb.PutRequest, pb.PutResponse>(async (req, call) => {
      checkPutRequest(req);
      checkRequestSize(wireSizeOf(req), maxBytes());
      return server.put(req, callAuth(call));
    }),
    DeleteRange: unary<pb.DeleteRangeRequest, pb.DeleteRangeResponse>(async (req, call) => {
      checkDeleteRequest(req);
      checkRequestSize(wireSizeOf(req), maxBytes());
      return server.deleteRange(req, callAuth(call));
    }),
    Txn: unary<pb.TxnRequest, pb.TxnResponse>(async (req, call) => {
      checkTxnRequest(req, server.limits.maxTxnOps);
      // After the op-count check, so a huge txn cannot make this quadratic walk expensive.
      checkIntervals(req.success ?? []);
      checkIntervals(req.failure ?? []);
      if (!isTxnReadOnly(req)) checkRequestSize(wireSizeOf(req), maxBytes());
      return server.txn(req, callAuth(call));
    }),
    Compact: unary<pb.CompactionRequest, pb.CompactionResponse>(async (req, call) => server.compact(req, callAuth(call))),
  };
}
