// The fast bidi path (src/api/fast_stream.ts) on a real member of ours, through etcdctl and a
// grpc-js client of our protos. A call with a deadline goes through grpc-js instead, so each
// case can compare what the two paths answer.
import http2 from 'node:http2';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as grpc from '@grpc/grpc-js';
import { clientConstructor } from '../../../src/pb/load';
import { encodeMessage } from '../../../src/pb/internal';
import type * as pb from '../../../src/pb/types';
import { BackgroundEtcdctl, etcdctl } from '../../helpers/etcdctl';
import { startEtcd, type EtcdMember } from '../../helpers/etcd-process';
import { waitFor } from './harness';

let m: EtcdMember;
const clients: grpc.Client[] = [];
const background: BackgroundEtcdctl[] = [];

beforeAll(async () => {
  m = await startEtcd();
});
afterAll(async () => {
  for (const c of clients) c.close();
  for (const bg of background) bg.stop();
  await m?.stop();
});

const b = (s: string): Buffer => Buffer.from(s);

function client(service: string): grpc.Client {
  const Ctor = clientConstructor(service);
  const c = new Ctor(m.clientHostPort, grpc.credentials.createInsecure(), { 'grpc.use_local_subchannel_pool': 1 });
  clients.push(c);
  return c;
}

function unary<T>(c: grpc.Client, method: string, req: unknown, md = new grpc.Metadata()): Promise<T> {
  const fn = (c as unknown as Record<string, (r: unknown, m: grpc.Metadata, cb: (e: grpc.ServiceError | null, v: T) => void) => void>)[method]!.bind(c);
  return new Promise((resolve, reject) => fn(req, md, (e, v) => (e ? reject(e) : resolve(v))));
}

interface Opened {
  stream: grpc.ClientDuplexStream<unknown, pb.WatchResponse>;
  got: pb.WatchResponse[];
  error: () => grpc.ServiceError | undefined;
}

/** A Watch stream; `viaGrpcJs` gives it a deadline, which routes it through grpc-js on the server. */
function watch(c: grpc.Client, viaGrpcJs: boolean, md = new grpc.Metadata()): Opened {
  const opts: grpc.CallOptions = viaGrpcJs ? { deadline: Date.now() + 60_000 } : {};
  const stream = (c as unknown as { Watch(md: grpc.Metadata, o: grpc.CallOptions): grpc.ClientDuplexStream<unknown, pb.WatchResponse> }).Watch(md, opts);
  const got: pb.WatchResponse[] = [];
  let err: grpc.ServiceError | undefined;
  stream.on('data', (r: pb.WatchResponse) => got.push(r));
  stream.on('error', (e: grpc.ServiceError) => (err = e));
  return { stream, got, error: () => err };
}

async function metric(name: string): Promise<number> {
  const text = await (await fetch(`${m.clientUrl}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  return line === undefined ? NaN : Number(line.split(' ')[1]);
}

describe('fast bidi path on a real member', () => {
  it('etcdctl watch and lease keep-alive', async () => {
    const w = new BackgroundEtcdctl(['watch', 'ctl/', '--prefix'], { endpoint: m.clientHostPort });
    background.push(w);
    // The watch is registered once a put shows up; keep putting until one does.
    for (let i = 0; i < 50 && !/ctl\/a/.test(w.stdout()); i++) {
      await etcdctl(['put', 'ctl/a', `v${i}`], { endpoint: m.clientHostPort });
      await new Promise((r) => setTimeout(r, 100));
    }
    await etcdctl(['put', 'ctl/b', 'last'], { endpoint: m.clientHostPort });
    await w.waitForOutput(/PUT\nctl\/b\nlast\n/);
    w.stop();
    const grant = await etcdctl(['lease', 'grant', '60'], { endpoint: m.clientHostPort });
    const id = /lease ([0-9a-f]+) granted/.exec(grant.stdout)![1]!;
    const ka = await etcdctl(['lease', 'keep-alive', '--once', id], { endpoint: m.clientHostPort });
    expect(ka.stdout).toBe(`lease ${id} keepalived with TTL(60)\n`);
    const unknown = await etcdctl(['lease', 'keep-alive', '--once', '1234abcd'], { endpoint: m.clientHostPort });
    expect(unknown.stderr).toContain('requested lease not found');
  });

  it('compacted start revision and progress answers match grpc-js', async () => {
    const kv = client('etcdserverpb.KV');
    const w = client('etcdserverpb.Watch');
    for (let i = 0; i < 3; i++) await unary(kv, 'Put', { key: b('cmp'), value: b(`v${i}`) });
    const head = await unary<pb.PutResponse>(kv, 'Put', { key: b('cmp'), value: b('last') });
    const rev = Number(head.header!.revision);
    await unary(kv, 'Compact', { revision: String(rev - 1), physical: true });
    const outcome = async (viaGrpcJs: boolean): Promise<unknown[]> => {
      const o = watch(w, viaGrpcJs);
      // One create at a time: the compacted answer comes from the hub's catch-up, whose turn
      // relative to a second create is not something to compare.
      o.stream.write({ createRequest: { key: b('cmp'), startRevision: '1' } });
      await waitFor(() => o.got.length >= 2, 5000, 'created, compacted');
      o.stream.write({ createRequest: { key: b('cmp'), startRevision: String(rev) } });
      await waitFor(() => o.got.length >= 4, 5000, 'created, event');
      o.stream.write({ progressRequest: {} });
      await waitFor(() => o.got.length >= 5, 5000, 'the progress answer');
      o.stream.cancel();
      return o.got.map((r) => ({ ...r, header: { ...r.header, revision: r.header!.revision } }));
    };
    const slow = await outcome(true);
    const fast = await outcome(false);
    expect(fast).toEqual(slow);
    expect(fast).toContainEqual(expect.objectContaining({ canceled: true, compactRevision: String(rev - 1) }));
    const progress = fast[4] as pb.WatchResponse;
    expect(progress.watchId).toBe('-1');
    expect(progress.events).toEqual([]);
  });

  it('a client that disappears leaves no watcher behind, on either path', async () => {
    const base = await metric('etcd_debugging_mvcc_watcher_total');
    for (const viaGrpcJs of [true, false]) {
      const u = new URL(m.clientUrl);
      const socket = net.connect(Number(u.port), u.hostname);
      const session = http2.connect(m.clientUrl, { createConnection: () => socket });
      session.on('error', () => undefined);
      const req = session.request({
        ':method': 'POST',
        ':path': '/etcdserverpb.Watch/Watch',
        'content-type': 'application/grpc',
        te: 'trailers',
        ...(viaGrpcJs ? { 'grpc-timeout': '100S' } : {}),
      });
      req.on('error', () => undefined);
      let bytes = 0;
      req.on('data', (c: Buffer) => (bytes += c.length));
      const frames: Buffer[] = [];
      for (let i = 0; i < 20; i++) {
        const msg = encodeMessage('etcdserverpb.WatchRequest', { createRequest: { key: b(`gone${i}`) } });
        const f = Buffer.alloc(5 + msg.length);
        f.writeUInt32BE(msg.length, 1);
        msg.copy(f, 5);
        frames.push(f);
      }
      req.write(Buffer.concat(frames));
      const deadline = Date.now() + 5000;
      while ((await metric('etcd_debugging_mvcc_watcher_total')) !== base + 20 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      expect(await metric('etcd_debugging_mvcc_watcher_total')).toBe(base + 20);
      expect(bytes).toBeGreaterThan(0);
      // The connection goes away under the open stream (no RST_STREAM, no GOAWAY).
      socket.destroy();
      const until = Date.now() + 10_000;
      while ((await metric('etcd_debugging_mvcc_watcher_total')) !== base && Date.now() < until) await new Promise((r) => setTimeout(r, 50));
      expect(await metric('etcd_debugging_mvcc_watcher_total')).toBe(base);
    }
  });

  it('with auth enabled, an invalid token gets the same error both ways', async () => {
    const auth = client('etcdserverpb.Auth');
    await unary(auth, 'UserAdd', { name: 'root', password: 'rootpw', options: { noPassword: false } });
    await unary(auth, 'UserGrantRole', { user: 'root', role: 'root' });
    await unary(auth, 'AuthEnable', {});
    try {
      const tok = (await unary<pb.AuthenticateResponse>(auth, 'Authenticate', { name: 'root', password: 'rootpw' })).token;
      const w = client('etcdserverpb.Watch');
      const bad = new grpc.Metadata();
      bad.set('token', 'not-a-token');
      const refused = async (viaGrpcJs: boolean): Promise<unknown> => {
        const o = watch(w, viaGrpcJs, bad);
        o.stream.write({ createRequest: { key: b('sec') } });
        await waitFor(() => o.error() !== undefined || o.got.length > 0, 5000, 'an answer');
        o.stream.cancel();
        const e = o.error();
        return e ? { code: e.code, details: e.details } : o.got;
      };
      const slow = await refused(true);
      const fast = await refused(false);
      expect(fast).toEqual(slow);
      // etcd checks the watch's permission with the caller it cannot authenticate: refused in cancel_reason.
      expect(fast).toEqual([
        expect.objectContaining({ created: true, canceled: true, cancelReason: 'rpc error: code = Unauthenticated desc = etcdserver: invalid auth token' }),
      ]);
      const good = new grpc.Metadata();
      good.set('token', tok);
      const o = watch(w, false, good);
      o.stream.write({ createRequest: { key: b('sec') } });
      await waitFor(() => o.got.length === 1, 5000, 'created');
      expect(o.got[0]).toMatchObject({ created: true, canceled: false });
      o.stream.cancel();
    } finally {
      const md = new grpc.Metadata();
      md.set('token', (await unary<pb.AuthenticateResponse>(auth, 'Authenticate', { name: 'root', password: 'rootpw' })).token);
      await unary(auth, 'AuthDisable', {}, md);
    }
  });
});
