// etcdserverpb.Cluster: member URL checks as etcd's v3rpc member server, then the server.
import * as grpc from '@grpc/grpc-js';
import type * as pb from '../pb/types';
import { etcdError } from '../errors';
import type { EtcdServerApi } from '../server/types';
import { unary } from './unary';
import { callAuth } from './auth';
import { validPeerUrls } from './urls';

export function clusterService(server: EtcdServerApi): grpc.UntypedServiceImplementation {
  return {
    MemberAdd: unary<pb.MemberAddRequest, pb.MemberAddResponse>(async (req, call) => {
      if (!validPeerUrls(req.peerURLs ?? [])) throw etcdError('MemberBadURLs');
      return server.memberAdd(req, callAuth(call));
    }),
    MemberRemove: unary<pb.MemberRemoveRequest, pb.MemberRemoveResponse>(async (req, call) => server.memberRemove(req, callAuth(call))),
    // etcd's v3rpc layer does not parse MemberUpdate's URLs; neither do we.
    MemberUpdate: unary<pb.MemberUpdateRequest, pb.MemberUpdateResponse>(async (req, call) => server.memberUpdate(req, callAuth(call))),
    MemberList: unary<pb.MemberListRequest, pb.MemberListResponse>(async (req, call) => {
      // etcd 3.6: any user, but a user (requireAuthInfo in EtcdServer.MemberList).
      server.auth?.requireUser(callAuth(call));
      return server.memberList(req);
    }),
    MemberPromote: unary<pb.MemberPromoteRequest, pb.MemberPromoteResponse>(async (req, call) => server.memberPromote(req, callAuth(call))),
  };
}
