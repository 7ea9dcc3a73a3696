// The peer prober behind etcd_network_peer_round_trip_time_seconds{To} and the known-peer hook
// behind etcd_network_known_peers{Local,Remote}: every peer is probed (a timed MemberInfo call)
// on plain and TLS URLs, its smoothed RTT observed at each status check, an unreachable peer
// warned about and never observed, and a removed peer no longer probed.
import fs from 'node:fs';
import * as grpc from '@grpc/grpc-js';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { PeerTransport, type TransportMetrics } from '../../../src/transport';
import { DEFAULT_LIMITS, type TransportLimits } from '../../../src/transport/options';
import { encodeMemberInfo, PEER_SERVICE } from '../../../src/transport/peer_proto';
import { PeerProber } from '../../../src/transport/prober';
import { generateKubeadmPki, type KubeadmPki } from '../../helpers/certs';
import { testTempDir } from '../../helpers/temp_dir';
import { waitFor } from '../../helpers/wait';
import { captureLog, listen, startNode, stopNode, type Node } from './helpers';
import { deadPeerUrl, freePort } from '../../helpers/ports';

/** Shrunk so that a test sees many probes and status checks within a second. */
const FAST: Partial<TransportLimits> = {
  proberIntervalMs: 20,
  proberTimeoutMs: 1000,
  proberStatusMonitorIntervalMs: 60,
  proberStatusErrorIntervalMs: 60,
};

interface Recorded {
  metrics: TransportMetrics;
  rtt: Array<{ to: bigint; seconds: number }>;
  known: Array<{ remote: bigint; known: boolean }>;
  rttTo(id: bigint): number[];
}

function recorder(): Recorded {
  const rtt: Recorded['rtt'] = [];
  const known: Recorded['known'] = [];
  return {
    rtt,
    known,
    rttTo: (id) => rtt.filter((r) => r.to === id).map((r) => r.seconds),
    metrics: {
      sentBytes: () => {},
      sentFailure: () => {},
      receivedBytes: () => {},
      receivedFailure: () => {},
      peerActive: () => {},
      observeRoundTrip: (to, seconds) => rtt.push({ to, seconds }),
      knownPeer: (remote, k) => known.push({ remote, known: k }),
    },
  };
}

const started: Node[] = [];
const cleanups: Array<() => void | Promise<void>> = [];

afterEach(async () => {
  for (const n of started.splice(0)) await stopNode(n);
  for (const c of cleanups.splice(0)) await c();
});

async function node(id: bigint, opts: Parameters<typeof startNode>[1] = {}): Promise<Node> {
  const n = await startNode(id, { ...opts, limits: { ...FAST, ...opts.limits } });
  started.push(n);
  return n;
}

const UNHEALTHY = 'prober detected unhealthy status';

describe('peer prober', () => {
  it('observes a small positive smoothed RTT for every peer and reports them known', async () => {
    const rec = recorder();
    const a = await node(1n, { metrics: rec.metrics });
    const b = await node(2n);
    const c = await node(3n);
    a.transport.addPeer(2n, [b.url]);
    a.transport.addPeer(3n, [c.url]);
    expect(rec.known).toEqual([
      { remote: 2n, known: true },
      { remote: 3n, known: true },
    ]);
    await waitFor('RTT observations for both peers', () => rec.rttTo(2n).length >= 3 && rec.rttTo(3n).length >= 3, { timeoutMs: 5000 });
    for (const s of [...rec.rttTo(2n), ...rec.rttTo(3n)]) {
      expect(s).toBeGreaterThan(0);
      // A loopback round trip: well under the 3.2768 s top bucket, even on a loaded machine.
      expect(s).toBeLessThan(0.5);
    }
    expect(rec.rtt.every((r) => r.to === 2n || r.to === 3n)).toBe(true);
  });

  it('warns about an unreachable peer at each status check and observes no RTT for it', async () => {
    const rec = recorder();
    const a = await node(1n, { metrics: rec.metrics });
    const b = await node(2n);
    a.transport.addPeer(2n, [b.url]);
    a.transport.addPeer(9n, [await deadPeerUrl()]);
    const warnings = (): Array<Record<string, unknown>> => a.cap.entries().filter((e) => e.msg === UNHEALTHY && e['remote-peer-id'] === '9');
    await waitFor('two unhealthy warnings', () => warnings().length >= 2, { timeoutMs: 5000 });
    // Probes have failed, not merely not run yet: the warning carries the probe's error.
    await waitFor('a warning with the probe error', () => warnings().some((w) => typeof w.error === 'string'), { timeoutMs: 5000 });
    expect(warnings()[0]).toMatchObject({ level: 'warn', 'round-tripper-name': 'ROUND_TRIPPER_RAFT_MESSAGE', rtt: '0s' });
    await waitFor('the live peer observed meanwhile', () => rec.rttTo(2n).length >= 2, { timeoutMs: 5000 });
    expect(rec.rttTo(9n)).toEqual([]);
    expect(rec.known).toContainEqual({ remote: 9n, known: true });
  });

  it('stops probing a removed peer and reports it unknown', async () => {
    const rec = recorder();
    const probesAt = new Map<bigint, number>([
      [2n, 0],
      [3n, 0],
    ]);
    // membersJson is what the MemberInfo handler (the probe's target) calls per request.
    const counting = (id: bigint) => () => {
      probesAt.set(id, probesAt.get(id)! + 1);
      return '[]';
    };
    const a = await node(1n, { metrics: rec.metrics });
    const b = await node(2n, { membersJson: counting(2n) });
    const c = await node(3n, { membersJson: counting(3n) });
    a.transport.addPeer(2n, [b.url]);
    a.transport.addPeer(3n, [c.url]);
    await waitFor('both peers probed and observed', () => rec.rttTo(2n).length >= 1 && rec.rttTo(3n).length >= 1, { timeoutMs: 5000 });

    a.transport.removePeer(2n);
    expect(rec.known).toEqual([
      { remote: 2n, known: true },
      { remote: 3n, known: true },
      { remote: 2n, known: false },
    ]);
    const observedB = rec.rttTo(2n).length;
    const probedB = probesAt.get(2n)!;
    const observedC = rec.rttTo(3n).length;
    const probedC = probesAt.get(3n)!;
    // Meanwhile the other peer goes on being probed and observed, several rounds of each.
    await waitFor('more rounds for the remaining peer', () => rec.rttTo(3n).length >= observedC + 3 && probesAt.get(3n)! >= probedC + 5, {
      timeoutMs: 5000,
    });
    expect(rec.rttTo(2n).length).toBe(observedB);
    // A probe already on the wire when the peer was removed may still reach it; none after.
    expect(probesAt.get(2n)!).toBeLessThanOrEqual(probedB + 1);

    // Stopping the transport ends the probing too, without reporting peers unknown.
    await a.transport.stop();
    const afterStop = rec.rtt.length;
    const probedAfterStop = probesAt.get(3n)!;
    const d = await node(4n, { metrics: recorder().metrics });
    const watcher = recorder();
    const e = await node(5n, { metrics: watcher.metrics });
    e.transport.addPeer(4n, [d.url]);
    // Several status checks elsewhere pass; the stopped transport adds nothing.
    await waitFor('another transport to observe a few times', () => watcher.rttTo(4n).length >= 3, { timeoutMs: 5000 });
    expect(rec.rtt.length).toBe(afterStop);
    expect(probesAt.get(3n)!).toBeLessThanOrEqual(probedAfterStop + 1);
    expect(rec.known.filter((k) => !k.known)).toEqual([{ remote: 2n, known: false }]);
  });

  it('moves probing to the new URL on updatePeer', async () => {
    const rec = recorder();
    let oldProbes = 0;
    let newProbes = 0;
    const a = await node(1n, { metrics: rec.metrics });
    const old = await node(2n, { membersJson: () => (oldProbes++, '[]') });
    a.transport.addPeer(2n, [old.url]);
    await waitFor('the old URL probed', () => oldProbes >= 1, { timeoutMs: 5000 });
    const moved = await node(2n, { membersJson: () => (newProbes++, '[]') });
    a.transport.updatePeer(2n, [moved.url]);
    const before = oldProbes;
    await waitFor('the new URL probed several times', () => newProbes >= 5, { timeoutMs: 5000 });
    expect(oldProbes).toBeLessThanOrEqual(before + 1);
    expect(rec.known).toEqual([{ remote: 2n, known: true }]);
  });
});

describe('peer prober over TLS', () => {
  let pki: KubeadmPki;
  beforeAll(() => {
    pki = generateKubeadmPki([{ name: 'm1', ips: ['127.0.0.1'] }], testTempDir('prober-pki-'));
  }, 60_000);

  it('probes https peer URLs with the peer credentials', async () => {
    const ca = fs.readFileSync(pki.ca.cert);
    const pair = pki.peer.get('m1')!;
    const key = fs.readFileSync(pair.key);
    const cert = fs.readFileSync(pair.cert);
    const credentials = (secure: boolean): grpc.ChannelCredentials =>
      secure ? grpc.credentials.createSsl(ca, key, cert) : grpc.credentials.createInsecure();
    const member = async (id: bigint, metrics: TransportMetrics): Promise<{ t: PeerTransport; url: string }> => {
      const t = new PeerTransport({ memberId: id, clusterId: 0xc1a5n, log: captureLog().log, onMessage: () => {}, metrics, credentials, limits: FAST });
      const server = new grpc.Server();
      t.register(server);
      // Peers must present a client certificate, as with --peer-client-cert-auth.
      const port = await new Promise<number>((resolve, reject) =>
        server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createSsl(ca, [{ private_key: key, cert_chain: cert }], true), (err, p) =>
          err ? reject(err) : resolve(p),
        ),
      );
      cleanups.push(async () => {
        await t.stop();
        server.forceShutdown();
      });
      return { t, url: `https://127.0.0.1:${port}` };
    };
    const rec = recorder();
    const a = await member(1n, rec.metrics);
    const b = await member(2n, recorder().metrics);
    a.t.addPeer(2n, [b.url]);
    b.t.addPeer(1n, [a.url]);
    await waitFor('RTT observations over TLS', () => rec.rttTo(2n).length >= 2, { timeoutMs: 10_000 });
    for (const s of rec.rttTo(2n)) {
      expect(s).toBeGreaterThan(0);
      expect(s).toBeLessThan(0.5);
    }
  });
});

describe('PeerProber', () => {
  /** A peer service whose MemberInfo counts the probes it answers. */
  async function countingPeer(port = 0): Promise<{ port: number; probes: () => number }> {
    let probes = 0;
    const server = new grpc.Server();
    server.addService(PEER_SERVICE, {
      Stream: () => {},
      Snapshot: () => {},
      MemberInfo: (_call: unknown, cb: grpc.sendUnaryData<Buffer>) => {
        probes++;
        cb(null, encodeMemberInfo({ clusterId: 1n, memberId: 2n, membersJson: '[]' }));
      },
    });
    const bound = await listen(server, port);
    cleanups.push(() => server.forceShutdown());
    return { port: bound, probes: () => probes };
  }

  /** A prober whose interval is far beyond the test: any probe it makes is the one on connecting. */
  function slowProber(port: number, log = captureLog().log, rtts: number[] = []): PeerProber {
    const prober = new PeerProber({
      peerId: 2n,
      urls: [`http://127.0.0.1:${port}`],
      log,
      limits: { ...DEFAULT_LIMITS, ...FAST, proberIntervalMs: 600_000, proberTimeoutMs: 5000 },
      credentials: () => grpc.credentials.createInsecure(),
      metrics: { ...recorder().metrics, observeRoundTrip: (_to, s) => rtts.push(s) },
    });
    cleanups.push(() => prober.stop());
    return prober;
  }

  it('probes once as soon as the connection is up, not an interval later', async () => {
    const peer = await countingPeer();
    const rtts: number[] = [];
    const prober = slowProber(peer.port, captureLog().log, rtts);
    prober.start();
    await waitFor('a probe answered long before the first interval', () => prober.counts().succeeded === 1, { timeoutMs: 5000, intervalMs: 5 });
    expect(prober.isHealthy()).toBe(true);
    // Several status checks later (every 60 ms), still that one probe: it is not repeated.
    await waitFor('three status checks observing its RTT', () => rtts.length >= 3, { timeoutMs: 5000 });
    expect(peer.probes()).toBe(1);
    expect(prober.counts()).toEqual({ succeeded: 1, failed: 0 });
    expect(new Set(rtts).size).toBe(1);
  });

  it('probes a peer that starts listening later, once it is reachable', async () => {
    const port = await freePort();
    const cap = captureLog();
    const prober = slowProber(port, cap.log);
    prober.start();
    // Running, and the peer not yet probed: the status checks call it unhealthy.
    await waitFor('an unhealthy status for the silent peer', () => cap.entries().some((e) => e.msg === UNHEALTHY), { timeoutMs: 5000 });
    expect(prober.counts()).toEqual({ succeeded: 0, failed: 0 });
    const peer = await countingPeer(port);
    // grpc-js redials within reconnectMaxMs (2 s); the probe follows the connection.
    await waitFor('the late peer probed', () => prober.counts().succeeded === 1, { timeoutMs: 8000, intervalMs: 5 });
    expect(peer.probes()).toBe(1);
    expect(prober.isHealthy()).toBe(true);
  });

  it("keeps probing's smoothed RTT: starts at 0, weighs each sample 1/8", async () => {
    const delayMs = 100;
    const server = new grpc.Server();
    server.addService(PEER_SERVICE, {
      Stream: () => {},
      Snapshot: () => {},
      MemberInfo: (_call: unknown, cb: grpc.sendUnaryData<Buffer>) =>
        setTimeout(() => cb(null, encodeMemberInfo({ clusterId: 1n, memberId: 2n, membersJson: '[]' })), delayMs),
    });
    const port = await listen(server);
    cleanups.push(() => server.forceShutdown());
    const rtts: number[] = [];
    const prober = new PeerProber({
      peerId: 2n,
      urls: [`http://127.0.0.1:${port}`],
      log: captureLog().log,
      limits: { ...DEFAULT_LIMITS, ...FAST, proberStatusErrorIntervalMs: 60_000, proberStatusMonitorIntervalMs: 60_000 },
      credentials: () => grpc.credentials.createInsecure(),
      metrics: { ...recorder().metrics, observeRoundTrip: (_to, s) => rtts.push(s) },
    });
    cleanups.push(() => prober.stop());
    prober.start();
    await waitFor('a first answered probe', () => prober.counts().succeeded >= 1, { timeoutMs: 5000, intervalMs: 5 });
    const { succeeded } = prober.counts();
    const srtt = prober.srtt();
    expect(prober.isHealthy()).toBe(true);
    // Each sample took at least delayMs (and, even on a loaded machine, less than delayMs + 200):
    // after n samples from 0, SRTT = sum of 1/8 (7/8)^(n-i) rtt_i lies within (1 - (7/8)^n) times
    // those. A SRTT seeded with the first sample (RFC 6298) would be about delayMs, above this.
    const filled = 1 - 0.875 ** succeeded;
    expect(succeeded).toBeLessThanOrEqual(3);
    expect(srtt).toBeGreaterThanOrEqual(delayMs * filled);
    expect(srtt).toBeLessThan((delayMs + 200) * filled);
    // Status checks are far away: nothing observed yet.
    expect(rtts).toEqual([]);
  });
});
