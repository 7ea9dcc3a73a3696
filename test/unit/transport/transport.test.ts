import net from 'node:net';
import * as grpc from '@grpc/grpc-js';
import { FRAME_HEADER_BYTES } from '../../../src/grpcjs/wire';
import { encodeFramedBatch, encodeRaftMessage } from '../../../src/transport/codec';
import { afterEach, describe, expect, it } from 'vitest';
import { MessageType, newMessage, type Message } from '../../../src/raft/types';
import { fetchMemberInfo, ForwardFailed, PeerTransport, servePeerUrls, type ForwardedLeaseCalls } from '../../../src/transport';
import { etcdError } from '../../../src/errors';
import { captureLog } from './helpers';
import { waitFor } from '../../helpers/wait';
import { connectAll, startNode, stopNode, type Node } from './helpers';
import { deadPeerUrl } from '../../helpers/ports';

const started: Node[] = [];
const closers: Array<() => void> = [];

async function node(id: bigint, opts: Parameters<typeof startNode>[1] = {}): Promise<Node> {
  const n = await startNode(id, opts);
  started.push(n);
  return n;
}

afterEach(async () => {
  for (const n of started.splice(0)) await stopNode(n);
  for (const c of closers.splice(0)) c();
});

function heartbeat(from: bigint, to: bigint, commit: number): Message {
  return newMessage({ type: MessageType.MsgHeartbeat, from, to, term: 1, commit });
}

/** A TCP port that accepts connections and never answers (a hung peer). */
async function silentPeerUrl(): Promise<string> {
  const sockets: net.Socket[] = [];
  const srv = net.createServer((s) => {
    // The member under test may reset the connection; that must not be an uncaught error here.
    s.on('error', () => undefined);
    sockets.push(s);
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  closers.push(() => {
    for (const s of sockets) s.destroy();
    srv.close();
  });
  return `http://127.0.0.1:${(srv.address() as net.AddressInfo).port}`;
}

describe('PeerTransport', () => {
  it('delivers messages both ways, in order, and counts the peer active', async () => {
    const counts = { sent: 0, received: 0, active: [] as boolean[] };
    const metrics = {
      sentBytes: (_to: bigint, n: number) => (counts.sent += n),
      sentFailure: () => {},
      receivedBytes: (_from: bigint, n: number) => (counts.received += n),
      receivedFailure: () => {},
      peerActive: (_id: bigint, active: boolean) => counts.active.push(active),
    };
    const [a, b] = [await node(1n, { metrics }), await node(2n, { metrics })];
    connectAll([a, b]);
    for (let i = 1; i <= 100; i++) a.transport.send([heartbeat(1n, 2n, i)]);
    b.transport.send([newMessage({ type: MessageType.MsgHeartbeatResp, from: 2n, to: 1n, term: 1 })]);
    await waitFor('b to receive 100 messages', () => b.received.length === 100);
    expect(b.received.map((m) => m.commit)).toEqual(Array.from({ length: 100 }, (_, i) => i + 1));
    expect(b.received[0]).toEqual(heartbeat(1n, 2n, 1));
    await waitFor('a to receive the response', () => a.received.length === 1);
    expect(a.received[0]!.type).toBe(MessageType.MsgHeartbeatResp);
    await waitFor('both peers active', () => a.transport.activePeers() === 1 && b.transport.activePeers() === 1);
    expect(a.cap.entries().find((e) => e.msg === 'peer became active')).toMatchObject({ level: 'info', 'peer-id': '2' });
    expect(a.transport.activeSince(2n)).toBeGreaterThan(0);
    expect(a.transport.activeSince(9n)).toBe(0);
    expect(counts.sent).toBeGreaterThan(100 * 10);
    await waitFor('received bytes to match sent bytes', () => counts.received === counts.sent);
    expect(counts.active).toEqual([true, true]);
    expect(a.unreachable).toEqual([]);
  });

  it('carries MsgApp with many entries and keeps one stream per peer across many sends', async () => {
    const [a, b] = [await node(1n), await node(2n)];
    connectAll([a, b]);
    const entries = Array.from({ length: 50 }, (_, i) => ({ term: 2, index: i + 1, type: 0, data: Buffer.alloc(1000, i) }));
    const msgs = Array.from({ length: 40 }, (_, i) =>
      newMessage({ type: MessageType.MsgApp, from: 1n, to: 2n, term: 2, index: i, entries }),
    );
    for (const m of msgs) a.transport.send([m]);
    await waitFor('all MsgApps', () => b.received.length === 40);
    expect(b.received.map((m) => m.index)).toEqual(msgs.map((m) => m.index));
    expect(b.received[39]!.entries[49]!.data).toEqual(Buffer.alloc(1000, 49));
  });

  it('a dead or hung peer does not hold up the others', async () => {
    const [a, b] = [await node(1n), await node(2n)];
    connectAll([a, b]);
    a.transport.addPeer(3n, [await deadPeerUrl()]);
    a.transport.addPeer(4n, [await silentPeerUrl()]);
    for (let i = 1; i <= 50; i++) a.transport.send([heartbeat(1n, 3n, i), heartbeat(1n, 4n, i), heartbeat(1n, 2n, i)]);
    await waitFor('b to get all 50', () => b.received.length === 50, { timeoutMs: 3000 });
    await waitFor('dead peer reported unreachable', () => a.unreachable.includes(3n), { timeoutMs: 3000 });
    // Only b answers: the dead and the silent peer never count as active.
    await waitFor('b active', () => a.transport.isPeerActive(2n), { timeoutMs: 3000 });
    expect(a.transport.activePeers()).toBe(1);
  });

  it('bounds each peer queue: the excess is dropped, reported unreachable and logged', async () => {
    const a = await node(1n, { maxQueuedMsgsPerPeer: 8 });
    const hung = await silentPeerUrl();
    a.transport.addPeer(4n, [hung]);
    // One send enqueues everything before the first write: 8 fit, 5 are dropped.
    a.transport.send(Array.from({ length: 13 }, (_, i) => heartbeat(1n, 4n, i)));
    expect(a.unreachable.filter((id) => id === 4n)).toHaveLength(5);
    const dropped = a.cap.entries().filter((e) => e.msg === 'dropped internal Raft message since sending buffer is full (overloaded network)');
    expect(dropped).toHaveLength(5);
    expect(dropped[0]).toMatchObject({ level: 'warn', 'message-type': 'MsgHeartbeat', 'remote-peer-id': '4', 'remote-peer-active': false });
    // The hung peer keeps its writes pending; later sends keep being dropped, never queued without bound.
    for (let i = 0; i < 20; i++) a.transport.send([heartbeat(1n, 4n, 100 + i)]);
    expect(a.unreachable.filter((id) => id === 4n).length).toBeGreaterThanOrEqual(5 + 20 - 8);
  });

  it('rejects a peer of another cluster', async () => {
    const a = await node(1n, { clusterId: 0xaaaan });
    const b = await node(2n, { clusterId: 0xbbbbn });
    connectAll([a, b]);
    a.transport.send([heartbeat(1n, 2n, 1)]);
    await waitFor('a to learn of the mismatch', () =>
      a.cap.has('request sent was ignored by remote peer due to cluster ID mismatch'),
    );
    await waitFor('b to log the mismatch', () => b.cap.has('request cluster ID mismatch'));
    const warn = b.cap.entries().find((e) => e.msg === 'request cluster ID mismatch');
    expect(warn).toMatchObject({ level: 'warn', 'local-member-cluster-id': 'bbbb', 'remote-peer-cluster-id': 'aaaa' });
    expect(a.unreachable).toContain(2n);
    expect(b.received).toEqual([]);
    expect(a.transport.activePeers()).toBe(0);
    expect(a.cap.has('peer became active')).toBe(false);
  });

  it('serves a grpc-js client of the Stream call the same way (the TLS path)', async () => {
    const b = await node(2n, { clusterId: 0xc1a5n });
    b.transport.addPeer(1n, ['http://127.0.0.1:1']);
    const client = new grpc.Client(`127.0.0.1:${b.port}`, grpc.credentials.createInsecure());
    closers.push(() => client.close());
    const open = (cluster: string): grpc.ClientDuplexStream<Buffer, Buffer> => {
      const md = new grpc.Metadata();
      md.set('x-etcd-cluster-id', cluster);
      md.set('x-server-from', '1');
      md.set('x-raft-to', '2');
      return client.makeBidiStreamRequest('/peerpb.Peer/Stream', (x: Buffer) => x, (x: Buffer) => x, md);
    };
    const call = open('c1a5');
    let accepted = false;
    call.on('metadata', () => (accepted = true));
    call.on('data', () => {});
    const ended = new Promise<grpc.StatusObject>((resolve) => call.on('status', resolve));
    call.on('error', () => {});
    const batch = encodeFramedBatch([encodeRaftMessage(heartbeat(1n, 2n, 7))]);
    call.write(batch.subarray(FRAME_HEADER_BYTES));
    await waitFor('delivery', () => b.received.length === 1);
    expect(b.received[0]).toMatchObject({ type: MessageType.MsgHeartbeat, commit: 7, from: 1n });
    await waitFor('accepted', () => accepted);
    call.end();
    expect((await ended).code).toBe(grpc.status.OK);

    const wrong = open('dead');
    wrong.on('data', () => {});
    const err = await new Promise<grpc.ServiceError>((resolve) => wrong.on('error', resolve));
    expect(err.code).toBe(grpc.status.FAILED_PRECONDITION);
    expect(err.details).toBe('cluster ID mismatch');
  });

  it('refuses senders it does not know until they are added', async () => {
    const [a, b] = [await node(1n), await node(2n)];
    a.transport.addPeer(2n, [b.url]);
    a.transport.send([heartbeat(1n, 2n, 1)]);
    await waitFor('b to refuse the unknown sender', () => b.cap.has('failed to find remote peer in cluster'));
    expect(b.received).toEqual([]);
    b.transport.addPeer(1n, [a.url]);
    await waitFor('a to reconnect and deliver', () => {
      a.transport.send([heartbeat(1n, 2n, 2)]);
      return b.received.length > 0;
    });
  });

  it('sends MsgSnap over the chunked call and reports the snapshot status', async () => {
    const limits = { chunkBytes: 64 * 1024 };
    const [a, b] = [await node(1n, { limits }), await node(2n, { limits })];
    connectAll([a, b]);
    const data = Buffer.alloc(3 * 1024 * 1024 + 7);
    for (let i = 0; i < data.length; i += 4096) data[i] = i % 251;
    const snap = newMessage({
      type: MessageType.MsgSnap,
      from: 1n,
      to: 2n,
      term: 4,
      snapshot: { data, metadata: { index: 1000, term: 4, confState: { voters: [1n, 2n], learners: [], votersOutgoing: [], learnersNext: [], autoLeave: false } } },
    });
    a.transport.send([snap, heartbeat(1n, 2n, 1)]);
    await waitFor('snapshot delivered', () => b.received.some((m) => m.type === MessageType.MsgSnap), { timeoutMs: 10_000 });
    const got = b.received.find((m) => m.type === MessageType.MsgSnap)!;
    expect(got.snapshot!.metadata.index).toBe(1000);
    expect(got.snapshot!.data.equals(data)).toBe(true);
    expect(b.received.some((m) => m.type === MessageType.MsgHeartbeat)).toBe(true);
    await waitFor('snapshot status', () => a.snapshotStatus.length === 1);
    expect(a.snapshotStatus).toEqual([{ id: 2n, failed: false }]);
  });

  it('ETCDTS_PEER_HTTP2=node (grpc-js on Node http2) serves the Raft stream and snapshots the same way', async () => {
    const before = process.env.ETCDTS_PEER_HTTP2;
    process.env.ETCDTS_PEER_HTTP2 = 'node';
    let b: Node;
    try {
      b = await node(2n, { limits: { chunkBytes: 64 * 1024 } });
    } finally {
      if (before === undefined) delete process.env.ETCDTS_PEER_HTTP2;
      else process.env.ETCDTS_PEER_HTTP2 = before;
    }
    const a = await node(1n, { limits: { chunkBytes: 64 * 1024 } });
    connectAll([a, b]);
    for (let i = 1; i <= 50; i++) a.transport.send([heartbeat(1n, 2n, i)]);
    const data = Buffer.alloc(300 * 1024 + 3, 7);
    const confState = { voters: [1n, 2n], learners: [], votersOutgoing: [], learnersNext: [], autoLeave: false };
    a.transport.send([newMessage({ type: MessageType.MsgSnap, from: 1n, to: 2n, term: 4, snapshot: { data, metadata: { index: 9, term: 4, confState } } })]);
    await waitFor('heartbeats and the snapshot delivered', () => b.received.length === 51, { timeoutMs: 10_000 });
    expect(b.received.filter((m) => m.type === MessageType.MsgHeartbeat).map((m) => m.commit)).toEqual(Array.from({ length: 50 }, (_, i) => i + 1));
    expect(b.received.find((m) => m.type === MessageType.MsgSnap)!.snapshot!.data.equals(data)).toBe(true);
    b.transport.send([newMessage({ type: MessageType.MsgHeartbeatResp, from: 2n, to: 1n, term: 1 })]);
    await waitFor('a to receive the response', () => a.received.length === 1);
  });

  it('reports a failed snapshot to a dead peer', async () => {
    const a = await node(1n);
    a.transport.addPeer(3n, [await deadPeerUrl()]);
    const snap = newMessage({
      type: MessageType.MsgSnap,
      from: 1n,
      to: 3n,
      term: 4,
      snapshot: { data: Buffer.from('x'), metadata: { index: 5, term: 4, confState: { voters: [1n], learners: [], votersOutgoing: [], learnersNext: [], autoLeave: false } } },
    });
    a.transport.send([snap]);
    await waitFor('snapshot failure reported', () => a.snapshotStatus.length === 1);
    expect(a.snapshotStatus).toEqual([{ id: 3n, failed: true }]);
    expect(a.unreachable).toContain(3n);
  });

  it('reconnects when a peer comes back on the same URL', async () => {
    const [a, b] = [await node(1n), await node(2n)];
    connectAll([a, b]);
    a.transport.send([heartbeat(1n, 2n, 1)]);
    await waitFor('first delivery', () => b.received.length === 1);
    const port = b.port;
    await stopNode(b);
    started.splice(started.indexOf(b), 1);
    await waitFor('a to notice', () => a.transport.activePeers() === 0);
    expect(a.cap.has('peer became inactive (message send to peer failed)')).toBe(true);
    const b2 = await node(2n, { port });
    b2.transport.addPeer(1n, [a.url]);
    await waitFor('delivery to the restarted peer', () => {
      a.transport.send([heartbeat(1n, 2n, 2)]);
      return b2.received.length > 0;
    });
    await waitFor('active again', () => a.transport.activePeers() === 1);
  });

  it('removePeer stops sending; updatePeer moves to the new URL', async () => {
    const [a, b] = [await node(1n), await node(2n)];
    connectAll([a, b]);
    a.transport.send([heartbeat(1n, 2n, 1)]);
    await waitFor('b gets it', () => b.received.length === 1);
    // Member 2 moves to a new URL.
    const c2 = await node(2n);
    c2.transport.addPeer(1n, [a.url]);
    a.transport.updatePeer(2n, [c2.url]);
    await waitFor('delivery at the new URL', () => {
      a.transport.send([heartbeat(1n, 2n, 5)]);
      return c2.received.length > 0;
    });
    a.transport.removePeer(2n);
    a.transport.send([heartbeat(1n, 2n, 6)]);
    expect(a.transport.hasPeer(2n)).toBe(false);
    expect(a.transport.activePeers()).toBe(0);
    await new Promise((r) => setTimeout(r, 100));
    // Heartbeats written before the removal may still land; nothing sent after it does.
    expect(c2.received.some((m) => m.commit === 6)).toBe(false);
  });

  it('answers MemberInfo with the cluster ID and member list', async () => {
    const members = JSON.stringify([{ id: '1', name: 'm1', peerUrls: ['http://x:2380'] }]);
    const a = await node(0x8e9e05c52164694dn, { clusterId: 0xcdf818194e3a8c32n, membersJson: () => members });
    const info = await fetchMemberInfo(a.url, { timeoutMs: 5000 });
    expect(info).toEqual({ clusterId: 0xcdf818194e3a8c32n, memberId: 0x8e9e05c52164694dn, membersJson: members });
    await expect(fetchMemberInfo(await deadPeerUrl(), { timeoutMs: 2000 })).rejects.toThrow();
  });

  it('forwards lease calls to a member that answers them, and only from members of its cluster', async () => {
    const asked: string[] = [];
    const leases: ForwardedLeaseCalls = {
      renew: async (id) => {
        asked.push(`renew ${id}`);
        if (id === '404') throw etcdError('LeaseNotFound');
        return '60';
      },
      timeToLive: async (id) => {
        asked.push(`ttl ${id}`);
        return id === '404' ? { ttl: '-1', grantedTtl: '0' } : { ttl: '59', grantedTtl: '60' };
      },
    };
    const leader = await node(1n, { leases });
    const follower = await node(2n);
    connectAll([leader, follower]);
    // Lease IDs are int64: a negative one and one past 2^53 go through as they are.
    expect(await follower.transport.forwardLeaseRenew(1n, '-9', 2000)).toBe('60');
    expect(await follower.transport.forwardLeaseTimeToLive(1n, '9007199254740993', 2000)).toEqual({ ttl: '59', grantedTtl: '60' });
    expect(await follower.transport.forwardLeaseTimeToLive(1n, '404', 2000)).toEqual({ ttl: '-1', grantedTtl: '0' });
    // The leader's error comes back with its code and etcd's text.
    await expect(follower.transport.forwardLeaseRenew(1n, '404', 2000)).rejects.toEqual(new ForwardFailed(5, 'etcdserver: requested lease not found'));
    // A member that answers none (no `leases`): UNIMPLEMENTED, as from an etcd-ts before these calls.
    await expect(leader.transport.forwardLeaseRenew(2n, '1', 2000)).rejects.toMatchObject({ code: grpc.status.UNIMPLEMENTED });
    // Refused unless the caller is a member of the leader's cluster (checked as a Raft stream is).
    const stranger = await node(3n, { clusterId: 0xbadn });
    stranger.transport.addPeer(1n, [leader.url]);
    await expect(stranger.transport.forwardLeaseRenew(1n, '1', 2000)).rejects.toMatchObject({ code: grpc.status.FAILED_PRECONDITION });
    const unknown = await node(4n);
    unknown.transport.addPeer(1n, [leader.url]);
    await expect(unknown.transport.forwardLeaseRenew(1n, '1', 2000)).rejects.toMatchObject({ code: grpc.status.NOT_FOUND });
    expect(asked).toEqual(['renew -9', 'ttl 9007199254740993', 'ttl 404', 'renew 404']);
  });

  it('servePeerUrls listens on the peer URLs with the peer service', async () => {
    const t = new PeerTransport({ memberId: 7n, clusterId: 9n, log: captureLog().log, onMessage: () => {} });
    const ps = await servePeerUrls(['http://127.0.0.1:0'], t);
    closers.push(() => void ps.shutdown());
    expect(ps.ports[0]).toBeGreaterThan(0);
    const info = await fetchMemberInfo(`http://127.0.0.1:${ps.ports[0]}`, { timeoutMs: 5000 });
    expect(info).toEqual({ clusterId: 9n, memberId: 7n, membersJson: '[]' });
    await t.stop();
  });

  it('tells a removed member so, and it hears of it', async () => {
    let removed = false;
    const a = await node(1n, { onRemovedFromCluster: () => (removed = true) });
    const b = await node(2n, { isMemberRemoved: (id) => id === 1n });
    connectAll([a, b]);
    a.transport.send([heartbeat(1n, 2n, 1)]);
    await waitFor('a to learn it was removed', () => removed);
    expect(b.cap.has('rejected stream from remote peer because it was removed')).toBe(true);
    expect(b.received).toEqual([]);
  });
});
