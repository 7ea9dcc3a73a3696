// etcd's gRPC server enforces grpc-go's keepalive policy: --grpc-keepalive-min-time between a
// client's PINGs while it has streams open, none expected without one, three PINGs too soon and the
// connection gets GOAWAY ENHANCE_YOUR_CALM "too_many_pings" (grpc-go and grpc-js clients read that
// text and back their keepalive off). A PING that follows the server's own HEADERS or DATA is not
// judged (Go clients probe bandwidth after each response). Each case runs against ours and the
// real etcd 3.4, with a raw HTTP/2 client that sends PINGs as told.
import fs from 'node:fs';
import http2 from 'node:http2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { etcdBin, startEtcd, type EtcdMember } from '../helpers/etcd-process';
import { sleepMs, waitFor } from '../helpers/wait';

const REAL_ETCD = '/usr/bin/etcd';
const ENHANCE_YOUR_CALM = 0xb;

interface Session {
  s: http2.ClientHttp2Session;
  goaway: { code: number; data: string } | null;
  ping(): Promise<void>;
  close(): void;
}

async function connect(url: string): Promise<Session> {
  const s = http2.connect(url);
  const out: Session = {
    s,
    goaway: null,
    ping: () =>
      new Promise((resolve, reject) => {
        const sent = s.ping((err) => (err ? reject(err) : resolve()));
        if (!sent) reject(new Error('ping not sent'));
      }),
    close: () => s.destroy(),
  };
  s.on('goaway', (code: number, _last: number, data?: Buffer) => {
    out.goaway = { code, data: data?.toString('utf8') ?? '' };
  });
  s.on('error', () => undefined);
  await new Promise<void>((resolve, reject) => {
    s.once('connect', () => resolve());
    s.once('error', reject);
  });
  return out;
}

/** A gRPC Range of one key, raw: HEADERS and DATA back from the server. */
async function range(sess: Session): Promise<void> {
  const req = sess.s.request({ ':method': 'POST', ':path': '/etcdserverpb.KV/Range', 'content-type': 'application/grpc', te: 'trailers' });
  const body = Buffer.from([0x0a, 0x01, 0x61]); // key: "a"
  const frame = Buffer.alloc(5);
  frame.writeUInt32BE(body.length, 1);
  req.end(Buffer.concat([frame, body]));
  await new Promise<void>((resolve, reject) => {
    req.on('data', () => undefined);
    req.on('end', () => resolve());
    req.on('error', reject);
  });
}

/** An open Watch stream: the client has a stream open while it pings. */
function openWatch(sess: Session): http2.ClientHttp2Stream {
  const req = sess.s.request({ ':method': 'POST', ':path': '/etcdserverpb.Watch/Watch', 'content-type': 'application/grpc', te: 'trailers' });
  req.on('data', () => undefined);
  req.on('error', () => undefined);
  return req;
}

/** The server's GOAWAY for too many PINGs arrives (bounded wait), with grpc-go's code and text. */
async function expectSentAway(sess: Session): Promise<void> {
  await waitFor('GOAWAY', () => sess.goaway !== null, { timeoutMs: 5_000 });
  expect(sess.goaway).toEqual({ code: ENHANCE_YOUR_CALM, data: 'too_many_pings' });
}

const servers = [
  { label: 'ours', bin: etcdBin() },
  { label: 'real etcd 3.4', bin: REAL_ETCD },
] as const;

for (const { label, bin } of servers) {
  describe(`${label}: client PINGs and --grpc-keepalive-min-time`, () => {
    let member: EtcdMember;
    beforeAll(async () => {
      if (!fs.existsSync(bin)) throw new Error(`${bin} is missing: apt-get install -y etcd-server (.ci/run installs it)`);
      member = await startEtcd({ bin, args: ['--grpc-keepalive-min-time=300ms'] });
    }, 60_000);
    afterAll(async () => {
      await member?.stop();
    });

    /** A fresh connection for `body`, closed after it whatever happens. */
    const withSession = async (body: (sess: Session) => Promise<void>): Promise<void> => {
      const sess = await connect(member.clientUrl);
      try {
        await body(sess);
      } finally {
        sess.close();
      }
    };

    it('sends a client that PINGs with no stream open away after three strikes', () =>
      withSession(async (sess) => {
        // The first PING is never judged; the next three come too soon, the third strike is past the limit.
        for (let i = 0; i < 4; i++) await sess.ping();
        await expectSentAway(sess);
      }), 20_000);

    it('tolerates two PINGs too soon', () =>
      withSession(async (sess) => {
        for (let i = 0; i < 3; i++) await sess.ping();
        await sleepMs(300);
        expect(sess.goaway).toBeNull();
        await range(sess);
      }), 20_000);

    it('keeps a client that PINGs no sooner than the minimum while a stream is open', () =>
      withSession(async (sess) => {
        const w = openWatch(sess);
        for (let i = 0; i < 6; i++) {
          await sess.ping();
          await sleepMs(400);
        }
        expect(sess.goaway).toBeNull();
        await range(sess);
        w.close();
      }), 20_000);

    it('sends away a client that PINGs sooner than the minimum while a stream is open', () =>
      withSession(async (sess) => {
        openWatch(sess);
        for (let i = 0; i < 4; i++) {
          await sess.ping();
          await sleepMs(50);
        }
        await expectSentAway(sess);
      }), 20_000);

    it('does not judge a PING that follows a response (a Go client probing bandwidth)', () =>
      withSession(async (sess) => {
        for (let i = 0; i < 8; i++) {
          await range(sess);
          await sess.ping();
        }
        await sleepMs(300);
        expect(sess.goaway).toBeNull();
      }), 20_000);
  });
}
