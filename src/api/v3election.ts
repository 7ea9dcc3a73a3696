// etcd's v3electionpb.Election service: leader election from ordinary KV operations, the
// algorithm of etcd's client-side concurrency.Election run inside the server. Candidates
// put "<name>/<lease hex>" with their lease; the oldest key (lowest create revision) is the
// leader and its value is the leader's proclamation.
import * as grpc from '@grpc/grpc-js';
import { Code, EtcdError } from '../errors';
import { createMessage } from '../pb/internal';
import type * as pb from '../pb/types';
import { Event_EventType } from '../pb/types';
import type { EtcdServerApi } from '../server/types';
import type { WatchStreamEvent } from '../watch/types';
import { callAuth } from './auth';
import {
  SLASH,
  SingleWatch,
  asCaller,
  asConcurrencyError,
  type ConcurrencyApi,
  callSignal,
  concurrencyUnary,
  createRevisionIs,
  decrement,
  firstCreateRange,
  headerRevision,
  leaseKey,
  prefixEnd,
  rangeKvs,
  sessionLease,
  toRevision,
  waitDeletes,
} from './v3lock';

export type ElectionService = {
  Campaign: grpc.handleUnaryCall<pb.CampaignRequest, pb.CampaignResponse>;
  Proclaim: grpc.handleUnaryCall<pb.ProclaimRequest, pb.ProclaimResponse>;
  Leader: grpc.handleUnaryCall<pb.LeaderRequest, pb.LeaderResponse>;
  Observe: grpc.handleServerStreamingCall<pb.LeaderRequest, pb.LeaderResponse>;
  Resign: grpc.handleUnaryCall<pb.ResignRequest, pb.ResignResponse>;
};

// etcd's texts; clients see them with gRPC code Unknown.
const MISSING_LEADER_KEY = '"leader" field must be provided';
const NOT_LEADER = 'election: not leader';
const NO_LEADER = 'election: no leader';

export function createElectionService(server: EtcdServerApi): ElectionService {
  return {
    Campaign: concurrencyUnary(server, (api, req, signal) => campaign(api, req, signal)),
    Proclaim: concurrencyUnary(server, async (api, req: pb.ProclaimRequest, signal) => {
      const leader = requireLeader(req.leader);
      const lease = await sessionLease(api, leader.lease, signal);
      const header = await proclaim(api, leader.key, leader.rev, lease, req.value);
      return { header };
    }),
    Leader: concurrencyUnary(server, async (api, req: pb.LeaderRequest) => {
      const resp = await api.range(createMessage('etcdserverpb.RangeRequest', firstCreateRange(electionPrefix(req.name))));
      if (resp.kvs.length === 0) throw new EtcdError(Code.Unknown, NO_LEADER);
      return { header: resp.header, kv: resp.kvs[0] };
    }),
    Observe: (call) => {
      observe(asCaller(server, callAuth(call)), call).then(
        () => call.end(),
        (e: unknown) => call.emit('error', asConcurrencyError(e)),
      );
    },
    Resign: concurrencyUnary(server, async (api, req: pb.ResignRequest, signal) => {
      const leader = requireLeader(req.leader);
      // etcd opens a session here too, which grants a lease when none is given.
      await sessionLease(api, leader.lease, signal);
      return { header: await resign(api, leader.key, leader.rev) };
    }),
  };
}

function electionPrefix(name: Buffer): Buffer {
  return Buffer.concat([name, SLASH]);
}

function requireLeader(leader: pb.LeaderKey | null): pb.LeaderKey {
  if (leader === null) throw new EtcdError(Code.Unknown, MISSING_LEADER_KEY);
  return leader;
}

async function campaign(api: ConcurrencyApi, req: pb.CampaignRequest, signal: AbortSignal): Promise<pb.CampaignResponse> {
  const lease = await sessionLease(api, req.lease, signal);
  const prefix = electionPrefix(req.name);
  const key = leaseKey(prefix, lease);
  const resp = await api.txn(
    createMessage('etcdserverpb.TxnRequest', {
      compare: [createRevisionIs(key, '0')],
      success: [{ requestPut: { key, value: req.value, lease } }],
      failure: [{ requestRange: { key } }],
    }),
  );
  let rev = headerRevision(resp.header);
  if (!resp.succeeded) {
    // This lease already campaigns here: keep its place, update the value if it differs.
    const kv = rangeKvs(resp.responses[0])[0];
    rev = kv.createRevision;
    if (!kv.value.equals(req.value)) {
      try {
        await proclaim(api, key, rev, lease, req.value);
      } catch (e) {
        await resign(api, key, rev).catch(() => undefined);
        throw e;
      }
    }
  }
  try {
    await waitDeletes(api, prefix, decrement(rev), signal);
  } catch (e) {
    // A caller that gives up leaves the queue; other failures keep the key (as etcd does).
    if (signal.aborted) await resign(api, key, rev).catch(() => undefined);
    throw e;
  }
  return { header: resp.header, leader: { name: req.name, key, rev, lease } };
}

/** Replace the leader's value, only while `key` is still the one created at `rev`. */
async function proclaim(
  api: ConcurrencyApi,
  key: Buffer,
  rev: string,
  lease: string,
  value: Buffer,
): Promise<pb.ResponseHeader | null> {
  const resp = await api.txn(
    createMessage('etcdserverpb.TxnRequest', {
      compare: [createRevisionIs(key, rev)],
      success: [{ requestPut: { key, value, lease } }],
    }),
  );
  if (!resp.succeeded) throw new EtcdError(Code.Unknown, NOT_LEADER);
  return resp.header;
}

/** Delete the leader key if it is still ours; not being leader is not an error. */
async function resign(api: ConcurrencyApi, key: Buffer, rev: string): Promise<pb.ResponseHeader | null> {
  const resp = await api.txn(
    createMessage('etcdserverpb.TxnRequest', {
      compare: [createRevisionIs(key, rev)],
      success: [{ requestDeleteRange: { key } }],
    }),
  );
  return resp.header;
}

/**
 * Stream the election's leader value: the current one, every proclamation, and each new
 * leader after the previous one's key is deleted. Ends normally when a read or watch fails,
 * as etcd's Observe does.
 */
async function observe(
  api: ConcurrencyApi,
  call: grpc.ServerWritableStream<pb.LeaderRequest, pb.LeaderResponse>,
): Promise<void> {
  const signal = callSignal(call);
  const prefix = electionPrefix(call.request.name);
  const send = (msg: pb.LeaderResponse): Promise<void> => writeWithBackpressure(call, msg, signal);
  try {
    for (;;) {
      const resp = await api.range(createMessage('etcdserverpb.RangeRequest', firstCreateRange(prefix)));
      let leader: pb.KeyValue;
      let header: pb.ResponseHeader | null;
      if (resp.kvs.length > 0) {
        leader = resp.kvs[0];
        header = resp.header;
      } else {
        // No leader yet: the first key put under the prefix is the next one.
        const first = await firstPut(api, prefix, headerRevision(resp.header), signal);
        leader = first.kv;
        header = api.header(toRevision(first.kv.modRevision));
      }
      await send({ header, kv: leader });
      await followLeader(api, leader, headerRevision(header), send, signal);
    }
  } catch {
    // Client gone, or a read or watch failed: etcd ends the stream with an OK status then.
  }
}

async function firstPut(
  api: ConcurrencyApi,
  prefix: Buffer,
  fromRev: string,
  signal: AbortSignal,
): Promise<{ kv: pb.KeyValue }> {
  const watch = new SingleWatch(api, { key: prefix, rangeEnd: prefixEnd(prefix), startRevision: toRevision(fromRev) });
  try {
    for (;;) {
      const ev = await watch.next(signal);
      const put = ev.events.find((e) => e.type === Event_EventType.PUT);
      if (put !== undefined) return { kv: toPbKeyValue(put.kv) };
    }
  } finally {
    watch.close();
  }
}

/** Send each new value of the leader key until it is deleted. */
async function followLeader(
  api: ConcurrencyApi,
  leader: pb.KeyValue,
  fromRev: string,
  send: (msg: pb.LeaderResponse) => Promise<void>,
  signal: AbortSignal,
): Promise<void> {
  const watch = new SingleWatch(api, { key: leader.key, startRevision: toRevision(fromRev) + 1 });
  try {
    for (;;) {
      const ev = await watch.next(signal);
      for (const e of ev.events) {
        if (e.type === Event_EventType.DELETE) return;
        await send({ header: api.header(ev.headerRevision), kv: toPbKeyValue(e.kv) });
      }
    }
  } finally {
    watch.close();
  }
}

type MvccKeyValue = WatchStreamEvent['events'][number]['kv'];

function toPbKeyValue(kv: MvccKeyValue): pb.KeyValue {
  return {
    key: kv.key,
    createRevision: String(kv.createRevision),
    modRevision: String(kv.modRevision),
    version: String(kv.version),
    value: kv.value,
    lease: kv.lease.toString(),
  };
}

/** Write one message; when grpc-js's buffer is full, wait for it to drain (or the call to end). */
function writeWithBackpressure(
  call: grpc.ServerWritableStream<pb.LeaderRequest, pb.LeaderResponse>,
  msg: pb.LeaderResponse,
  signal: AbortSignal,
): Promise<void> {
  if (signal.aborted) return Promise.reject(new EtcdError(Code.Unknown, 'context canceled'));
  if (call.write(msg)) return Promise.resolve();
  return new Promise<void>((resolve) => {
    const done = (): void => {
      call.off('drain', done);
      signal.removeEventListener('abort', done);
      resolve();
    };
    call.on('drain', done);
    signal.addEventListener('abort', done, { once: true });
  });
}
