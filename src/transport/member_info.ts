// Client of the MemberInfo RPC: what a member joining an existing cluster asks a peer first.
import * as grpc from '@grpc/grpc-js';
import { channelOptions, DEFAULT_LIMITS } from './options';
import { decodeMemberInfo, EMPTY, identity, MEMBER_INFO_PATH, type MemberInfo } from './peer_proto';
import { defaultCredentials, peerTarget } from './urls';

export type { MemberInfo } from './peer_proto';

export async function fetchMemberInfo(
  peerUrl: string,
  opts: { timeoutMs: number; credentials?(secure: boolean): grpc.ChannelCredentials },
): Promise<MemberInfo> {
  const t = peerTarget(peerUrl);
  const creds = (opts.credentials ?? defaultCredentials)(t.secure);
  const client = new grpc.Client(t.target, creds, channelOptions(DEFAULT_LIMITS));
  try {
    const raw = await new Promise<Buffer>((resolve, reject) => {
      client.makeUnaryRequest(
        MEMBER_INFO_PATH,
        identity,
        identity,
        EMPTY,
        new grpc.Metadata(),
        { deadline: Date.now() + opts.timeoutMs },
        (err: grpc.ServiceError | null, resp?: Buffer) => (err !== null || resp === undefined ? reject(err ?? new Error('empty response')) : resolve(resp)),
      );
    });
    return decodeMemberInfo(raw);
  } finally {
    client.close();
  }
}
