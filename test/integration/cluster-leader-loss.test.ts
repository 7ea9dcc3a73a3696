// Leader loss as a client sees it (issue 50), the same steps against our server and the real etcd:
// a 3-member cluster, a lease granted, the leader killed with SIGKILL, and at once a keepalive
// through the JSON gateway and one on a gRPC stream, a put to each follower, a lease time-to-live
// and a linearizable read through followers. A keepalive is held until a new leader answers it
// with the lease's TTL (etcd's LeaseRenew forwards to the leader until its request timeout); the
// others succeed or fail with etcd's own error text and code. No answer may carry grpc-js's own
// text or the address of the dead member. How long each request was held is printed for both.
import http from 'node:http';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { Errors } from '../../src/errors';
import { Cluster, ClusterMember } from '../helpers/cluster';
import { REPO_ROOT } from '../helpers/etcd-process';
import { EtcdGrpc, isRpcError, StreamReader, type Msg } from '../helpers/grpc';
import { waitFor } from '../helpers/wait';

const ELECTION_TIMEOUT_MS = 1_000;
const LEASE_TTL_SEC = 60;
/** etcd's request timeout with this election timeout is 7 s; a client waits longer than that. */
const CLIENT_DEADLINE_MS = 15_000;
const REAL_ETCD = '/usr/bin/etcd';

/** etcd's error texts and their gRPC codes: the only errors a client may see. */
const ETCD_ERRORS = new Map<string, number>(Object.values(Errors).map((d) => [d.message, d.code]));
const FORBIDDEN = ['ECONNREFUSED', 'No connection established', 'Last error'];

let cluster: Cluster | undefined;
const grpcs: EtcdGrpc[] = [];
afterAll(async () => {
  for (const g of grpcs) g.close();
  await cluster?.close();
}, 30_000);

interface Outcome {
  what: string;
  /** ms from the leader's death (the kill returned) to the answer. */
  heldMs: number;
  ok: boolean;
  /** The TTL of a keepalive that succeeded. */
  ttl?: number;
  /** The error a client saw: gRPC code and text. */
  code?: number;
  text?: string;
  /** Everything the client received, for the leak checks. */
  raw: string;
}

/** One gateway keepalive: POST /v3/lease/keepalive, the whole answer body. */
function gatewayKeepAlive(m: ClusterMember, id: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const body = JSON.stringify({ ID: id });
    const req = http.request(
      `${m.clientUrl}/v3/lease/keepalive`,
      { method: 'POST', headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) }, timeout: CLIENT_DEADLINE_MS },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error(`gateway keepalive: no answer within ${CLIENT_DEADLINE_MS} ms`)));
    req.on('error', reject);
    req.end(body);
  });
}

function gatewayOutcome(what: string, t0: number, r: { status: number; body: string }): Outcome {
  const heldMs = performance.now() - t0;
  // grpc-gateway streams one JSON object per message: {"result": ...} or {"error": ...}; a failure
  // before the first message is a plain error object.
  const first = JSON.parse(r.body.split('\n')[0] ?? '{}') as { result?: Msg; error?: { grpc_code: number; message: string }; code?: number; message?: string };
  if (first.result) return { what, heldMs, ok: true, ttl: Number(first.result['TTL']), raw: r.body };
  const err = first.error ?? { grpc_code: first.code ?? -1, message: first.message ?? r.body };
  return { what, heldMs, ok: false, code: err.grpc_code, text: err.message, raw: `${r.status} ${r.body}` };
}

/** The client gave up (no answer within its deadline, or the connection failed). */
function clientFailure(what: string, t0: number, e: Error): Outcome {
  return { what, heldMs: performance.now() - t0, ok: false, text: e.message, raw: e.message };
}

async function rpcOutcome(what: string, t0: number, p: Promise<Msg>, ttlOf?: (r: Msg) => number): Promise<Outcome> {
  try {
    const r = await p;
    return { what, heldMs: performance.now() - t0, ok: true, ...(ttlOf ? { ttl: ttlOf(r) } : {}), raw: JSON.stringify(r) };
  } catch (e) {
    const heldMs = performance.now() - t0;
    if (!isRpcError(e)) return { what, heldMs, ok: false, text: String(e), raw: String(e) };
    return { what, heldMs, ok: false, code: e.code, text: e.details, raw: `${e.code} ${e.details} ${e.message}` };
  }
}

interface Run {
  server: string;
  outcomes: Outcome[];
  dead: string[];
}

async function leaderLoss(bin: string, label: string): Promise<Run> {
  cluster = await Cluster.start({ size: 3, bin, args: [`--election-timeout=${ELECTION_TIMEOUT_MS}`, '--heartbeat-interval=100'] });
  const c = cluster;
  const leader = await c.waitLeader();
  const [f1, f2] = c.members.filter((m) => m !== leader) as [ClusterMember, ClusterMember];
  const g1 = new EtcdGrpc(f1.clientHostPort);
  const g2 = new EtcdGrpc(f2.clientHostPort);
  grpcs.push(g1, g2);

  const grant = await leader.client().unary('Lease', 'LeaseGrant', { TTL: String(LEASE_TTL_SEC) }, 5_000);
  const id = String(grant['ID']);
  // The application's steady state: its keepalives already flow through the followers.
  const stream = g2.bidi('Lease', 'LeaseKeepAlive');
  const reader = new StreamReader(stream, 100);
  stream.write({ ID: id });
  expect(Number((await reader.next(5_000))['TTL'])).toBe(LEASE_TTL_SEC);
  expect(gatewayOutcome('warm-up', performance.now(), await gatewayKeepAlive(f1, id)).ttl).toBe(LEASE_TTL_SEC);
  await g1.unary('KV', 'Put', { key: Buffer.from('warm'), value: Buffer.from('1') }, 5_000);

  const dead = [`127.0.0.1:${leader.clientPort}`, `localhost:${leader.clientPort}`, `127.0.0.1:${leader.listenPeerPort}`, new URL(leader.peerUrl).host];
  await leader.kill9();
  const t0 = performance.now();
  const pending: Array<Promise<Outcome>> = [
    gatewayKeepAlive(f1, id).then(
      (r) => gatewayOutcome('gateway keepalive (f1)', t0, r),
      (e: Error) => clientFailure('gateway keepalive (f1)', t0, e),
    ),
    rpcOutcome(
      'gRPC keepalive (f2 stream)',
      t0,
      (async () => {
        stream.write({ ID: id });
        return reader.next(CLIENT_DEADLINE_MS);
      })(),
      (r) => Number(r['TTL']),
    ),
    rpcOutcome('put (f1)', t0, g1.unary('KV', 'Put', { key: Buffer.from('k1'), value: Buffer.from('v') }, CLIENT_DEADLINE_MS)),
    rpcOutcome('put (f2)', t0, g2.unary('KV', 'Put', { key: Buffer.from('k2'), value: Buffer.from('v') }, CLIENT_DEADLINE_MS)),
    rpcOutcome('lease time-to-live (f1)', t0, g1.unary('Lease', 'LeaseTimeToLive', { ID: id }, CLIENT_DEADLINE_MS), (r) => Number(r['grantedTTL'])),
    rpcOutcome('linearizable range (f2)', t0, g2.unary('KV', 'Range', { key: Buffer.from('warm') }, CLIENT_DEADLINE_MS)),
  ];
  const outcomes = await Promise.all(pending);
  stream.end();
  const newLeader = await c.waitLeader({ not: leader });
  // A put's answer depends on whether its member became the leader (etcd's parseProposeCtxErr).
  for (const o of outcomes) {
    if (o.what === 'put (f1)') o.what = `put to the member ${newLeader === f1 ? 'elected next' : 'still a follower'}`;
    if (o.what === 'put (f2)') o.what = `put to the member ${newLeader === f2 ? 'elected next' : 'still a follower'}`;
  }
  outcomes.sort((a, b) => (a.what < b.what ? -1 : a.what > b.what ? 1 : 0));
  for (const o of outcomes) {
    const how = o.ok ? `ok${o.ttl !== undefined ? ` TTL ${o.ttl}` : ''}` : `error ${o.code} "${o.text}"`;
    console.log(`[${label}] ${o.what}: held ${o.heldMs.toFixed(0)} ms, ${how}`);
  }
  console.log(`[${label}] new leader: ${newLeader === f1 ? 'f1' : 'f2'}`);
  const run = { server: label, outcomes, dead };
  await c.close();
  cluster = undefined;
  return run;
}

/** What a user would check of every answer, ours and etcd's alike. */
function checkRun(run: Run): void {
  for (const o of run.outcomes) {
    for (const s of [...FORBIDDEN, ...run.dead]) expect(o.raw, `${run.server} ${o.what} leaks "${s}"`).not.toContain(s);
    if (o.ok) continue;
    // Only etcd's own errors, with etcd's code for that text.
    expect(ETCD_ERRORS.has(o.text ?? ''), `${run.server} ${o.what}: "${o.text}" is not an etcd error`).toBe(true);
    expect(o.code, `${run.server} ${o.what}: code of "${o.text}"`).toBe(ETCD_ERRORS.get(o.text ?? ''));
  }
  for (const o of run.outcomes.filter((x) => x.what.includes('keepalive'))) {
    expect(o.ok, `${run.server} ${o.what}: ${o.text}`).toBe(true);
    expect(o.ttl, `${run.server} ${o.what}`).toBe(LEASE_TTL_SEC);
  }
  const ttl = run.outcomes.find((o) => o.what.startsWith('lease time-to-live'))!;
  if (ttl.ok) expect(ttl.ttl).toBe(LEASE_TTL_SEC);
}

/**
 * Quorum lost: the leader and one follower killed. The survivor has no leader for good; what it
 * answers once etcd's request timeout has passed.
 */
async function quorumLoss(bin: string, label: string): Promise<Outcome[]> {
  cluster = await Cluster.start({ size: 3, bin, args: [`--election-timeout=${ELECTION_TIMEOUT_MS}`, '--heartbeat-interval=100'] });
  const c = cluster;
  const leader = await c.waitLeader();
  const [f1, f2] = c.members.filter((m) => m !== leader) as [ClusterMember, ClusterMember];
  const g = new EtcdGrpc(f1.clientHostPort);
  grpcs.push(g);
  const id = String((await leader.client().unary('Lease', 'LeaseGrant', { TTL: String(LEASE_TTL_SEC) }, 5_000))['ID']);
  await g.unary('KV', 'Put', { key: Buffer.from('warm'), value: Buffer.from('1') }, 5_000);
  await f2.kill9();
  await leader.kill9();
  await waitFor('the survivor to lose its leader', async () => (await f1.status(1_000)).leader === '0', { timeoutMs: 10_000, intervalMs: 20 });
  const t0 = performance.now();
  const stream = g.bidi('Lease', 'LeaseKeepAlive');
  const reader = new StreamReader(stream, 100);
  stream.write({ ID: id });
  const outcomes = await Promise.all([
    rpcOutcome('gRPC keepalive', t0, reader.next(CLIENT_DEADLINE_MS), (r) => Number(r['TTL'])),
    gatewayKeepAlive(f1, id).then(
      (r) => gatewayOutcome('gateway keepalive', t0, r),
      (e: Error) => clientFailure('gateway keepalive', t0, e),
    ),
    rpcOutcome('put', t0, g.unary('KV', 'Put', { key: Buffer.from('k'), value: Buffer.from('v') }, CLIENT_DEADLINE_MS)),
    rpcOutcome('lease grant', t0, g.unary('Lease', 'LeaseGrant', { TTL: '10' }, CLIENT_DEADLINE_MS)),
    rpcOutcome('lease time-to-live', t0, g.unary('Lease', 'LeaseTimeToLive', { ID: id }, CLIENT_DEADLINE_MS)),
    rpcOutcome('linearizable range', t0, g.unary('KV', 'Range', { key: Buffer.from('warm') }, CLIENT_DEADLINE_MS)),
  ]);
  stream.end();
  for (const o of outcomes) console.log(`[${label}, no quorum] ${o.what}: held ${o.heldMs.toFixed(0)} ms, ${o.ok ? 'ok' : `error ${o.code} "${o.text}"`}`);
  await c.close();
  cluster = undefined;
  return outcomes;
}

describe('leader loss as clients see it: ours and etcd, same steps', () => {
  it('held keepalives answer with the TTL once a new leader is elected; other requests succeed or fail with etcd errors', async () => {
    const ours = await leaderLoss(path.join(REPO_ROOT, 'bin', 'etcd'), 'ours');
    const etcd = await leaderLoss(REAL_ETCD, 'etcd');
    checkRun(ours);
    checkRun(etcd);
    // A put sent to a follower goes to the dead leader and is lost with it: it times out after
    // etcd's request timeout, with etcd's text for that member's view of the election.
    for (const run of [ours, etcd]) {
      for (const o of run.outcomes.filter((x) => x.what.startsWith('put') && !x.ok)) {
        expect([Errors.Timeout.message, Errors.TimeoutDueToLeaderFail.message, Errors.TimeoutDueToConnectionLost.message]).toContain(o.text);
      }
    }
    // The same answer (success, or the same error text) for each request, ours and etcd's.
    expect(ours.outcomes.map((o) => o.what)).toEqual(etcd.outcomes.map((o) => o.what));
    for (let i = 0; i < ours.outcomes.length; i++) {
      const a = ours.outcomes[i]!;
      const b = etcd.outcomes[i]!;
      expect(a.ok ? 'ok' : a.text, `${a.what}: ours vs etcd`).toBe(b.ok ? 'ok' : b.text);
    }
  }, 180_000);

  it('without a quorum, each request fails as etcd fails it once its request timeout has passed', async () => {
    const ours = await quorumLoss(path.join(REPO_ROOT, 'bin', 'etcd'), 'ours');
    const etcd = await quorumLoss(REAL_ETCD, 'etcd');
    for (const [i, a] of ours.entries()) {
      const b = etcd[i]!;
      for (const s of FORBIDDEN) expect(a.raw, `ours ${a.what} leaks "${s}"`).not.toContain(s);
      expect(a.ok ? 'ok' : `${a.code} ${a.text}`, `${a.what}: ours vs etcd`).toBe(b.ok ? 'ok' : `${b.code} ${b.text}`);
    }
  }, 180_000);
});
