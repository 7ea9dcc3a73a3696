// Health and round-trip time of one peer, for etcd_network_peer_round_trip_time_seconds{To} and
// etcd's "prober detected unhealthy status" warning. etcd's rafthttp adds every peer to a prober
// (github.com/xiang90/probing) that sends GET /raft/probing every proberInterval and keeps a
// smoothed RTT; a monitor per peer (probing_status.go) wakes first after statusErrorInterval,
// then every statusMonitoringInterval while the peer is healthy and every statusErrorInterval
// while it is not, warns when it is unhealthy and observes the smoothed RTT into the histogram.
// The same here, with one probe per wake-up of the probe timer and at most one in flight, plus
// one as soon as the connection is up (probeWhenConnected says why).
//
// What a probe is: one MemberInfo call, timed. Our peers speak gRPC, not etcd's HTTP handlers,
// so there is no /raft/probing to GET, and a new RPC would be answered UNIMPLEMENTED by members
// running older code. MemberInfo has been served by every member since the peer service existed,
// answers anyone (joining members call it before they are members), costs the remote a few
// hundred bytes, and goes through grpc-js on plain and TLS URLs alike. It is answered on the
// remote's event loop, as etcd's probing handler answers from its HTTP server, so the RTT
// includes a busy remote the way Raft heartbeats feel it. Timing an HTTP/2 PING instead was
// not possible on both paths: grpc-js exposes no ping on its channels (TLS peers) and our raw
// client's connection carries the Raft stream alone. The probe has its own channel (its own
// connection, dialled when the prober starts so the first sample is not a handshake), so it
// never queues behind or ahead of Raft batches and adds nothing to the message path.
import * as grpc from '@grpc/grpc-js';
import { performance } from 'node:perf_hooks';
import { formatGoDurationMs, hexId, type Logger } from '../log';
import type { TransportMetrics } from './metrics';
import { channelOptions, type TransportLimits } from './options';
import { decodeMemberInfo, EMPTY, identity, MEMBER_INFO_PATH } from './peer_proto';
import { peerTarget, type PeerTarget } from './urls';

/** etcd's name of the round tripper of its stream prober, the one that carries Raft messages. */
export const ROUND_TRIPPER_RAFT_MESSAGE = 'ROUND_TRIPPER_RAFT_MESSAGE';

/** probing's α: SRTT = (1 - α) * SRTT + α * RTT. */
const SRTT_WEIGHT = 0.125;

export interface ProberConfig {
  peerId: bigint;
  urls: readonly string[];
  log: Logger;
  limits: TransportLimits;
  credentials: (secure: boolean) => grpc.ChannelCredentials;
  metrics: TransportMetrics;
}

export class PeerProber {
  private readonly targets: PeerTarget[];
  /** The URL probed until a probe fails (probing's `pinned`). */
  private pinned = 0;
  private client: grpc.Client | null = null;
  private inFlight: grpc.ClientUnaryCall | null = null;
  private probeTimer: NodeJS.Timeout | null = null;
  private monitorTimer: NodeJS.Timeout | null = null;
  private stopped = false;
  // probing's status: like it, SRTT starts at 0 and the peer counts unhealthy until a probe succeeds.
  private srttMs = 0;
  private succeeded = 0;
  private failed = 0;
  private healthy = false;
  private lastError: Error | null = null;

  constructor(private readonly cfg: ProberConfig) {
    this.targets = cfg.urls.map(peerTarget);
  }

  start(): void {
    if (this.stopped || this.probeTimer !== null) return;
    const l = this.cfg.limits;
    this.probeWhenConnected(this.getClient(), Date.now() + l.proberIntervalMs);
    this.probeTimer = setInterval(() => this.probe(), l.proberIntervalMs);
    this.probeTimer.unref();
    this.scheduleMonitor(l.proberStatusErrorIntervalMs);
  }

  /**
   * One probe as soon as the connection is up, before the first tick of the interval. Besides an
   * RTT sample seconds earlier, this is about V8. A probe is a grpc-js call: Node's http2 streams
   * here, grpc-js's generic dispatch on the peer. The first one used to come ~4 s after the start,
   * in the middle of a fresh cluster's first load, and found the hottest code (Node's socket
   * stream internals, our HTTP/2 connection's send path) optimized for the one kind of stream the
   * load had shown it: --trace-deopt saw ~40 optimized functions thrown away on the leader at
   * once, and the next run of 1600 writes compiled 39-57 functions on the leader (16 with this
   * probe) while it ran slower code meanwhile. Three members, one client, runs of 1600 puts
   * on fresh clusters, alternating: the second run 932-1026 puts/s (median 960, p99 3.6-4.4 ms;
   * 13 clusters) with the first probe at 4 s, 1001-1161 (median 1101, p99 2.5-3.4; 11) with this
   * one, 1004-1193 (median 1138; 15) with no probes at all. Gives up at `deadlineMs`, when the
   * interval's first probe takes over.
   */
  private probeWhenConnected(client: grpc.Client, deadlineMs: number): void {
    const channel = client.getChannel();
    const state = channel.getConnectivityState(true);
    if (state === grpc.connectivityState.READY) {
      this.probe();
      return;
    }
    if (state === grpc.connectivityState.SHUTDOWN) return;
    channel.watchConnectivityState(state, deadlineMs, (err?: Error) => {
      // A deadline passed, the prober stopped or the client was replaced: the interval probes on.
      if (err !== undefined || this.stopped || this.client !== client || this.succeeded + this.failed > 0) return;
      this.probeWhenConnected(client, deadlineMs);
    });
  }

  stop(): void {
    if (this.stopped) return;
    this.stopped = true;
    if (this.probeTimer !== null) clearInterval(this.probeTimer);
    this.probeTimer = null;
    if (this.monitorTimer !== null) clearTimeout(this.monitorTimer);
    this.monitorTimer = null;
    const call = this.inFlight;
    this.inFlight = null;
    call?.cancel();
    this.closeClient();
  }

  /** Smoothed RTT in ms (0 before the first successful probe). */
  srtt(): number {
    return this.srttMs;
  }

  isHealthy(): boolean {
    return this.healthy;
  }

  /** Probes sent and answered / failed so far (probing's Total - Loss, Loss). */
  counts(): { succeeded: number; failed: number } {
    return { succeeded: this.succeeded, failed: this.failed };
  }

  private getClient(): grpc.Client {
    if (this.client === null) {
      const t = this.targets[this.pinned]!;
      this.client = new grpc.Client(t.target, this.cfg.credentials(t.secure), channelOptions(this.cfg.limits));
      // Connect now: a probe then times a round trip, not a dial and handshake.
      this.client.getChannel().getConnectivityState(true);
    }
    return this.client;
  }

  private closeClient(): void {
    const c = this.client;
    this.client = null;
    c?.close();
  }

  private probe(): void {
    // A probe still waiting (at most proberTimeoutMs) takes this turn, like a Go ticker's dropped tick.
    if (this.stopped || this.inFlight !== null) return;
    const startMs = performance.now();
    const call: grpc.ClientUnaryCall = this.getClient().makeUnaryRequest(
      MEMBER_INFO_PATH,
      identity,
      identity,
      EMPTY,
      new grpc.Metadata(),
      { deadline: Date.now() + this.cfg.limits.proberTimeoutMs },
      (err: grpc.ServiceError | null, resp?: Buffer) => {
        if (call !== this.inFlight) return;
        this.inFlight = null;
        if (err !== null || resp === undefined) {
          this.recordFailure(err ?? new Error('empty probe response'));
          return;
        }
        try {
          decodeMemberInfo(resp);
        } catch (e) {
          this.recordFailure(e instanceof Error ? e : new Error(String(e)));
          return;
        }
        this.record(performance.now() - startMs);
      },
    );
    this.inFlight = call;
  }

  private record(rttMs: number): void {
    this.succeeded++;
    this.healthy = true;
    this.srttMs = (1 - SRTT_WEIGHT) * this.srttMs + SRTT_WEIGHT * rttMs;
    this.lastError = null;
  }

  private recordFailure(err: Error): void {
    this.failed++;
    this.healthy = false;
    this.lastError = err;
    // Like probing, the next probe tries the peer's next URL.
    if (this.targets.length > 1) {
      this.pinned = (this.pinned + 1) % this.targets.length;
      this.closeClient();
    }
  }

  private scheduleMonitor(delayMs: number): void {
    this.monitorTimer = setTimeout(() => this.checkStatus(), delayMs);
    this.monitorTimer.unref();
  }

  private checkStatus(): void {
    this.monitorTimer = null;
    if (this.stopped) return;
    const l = this.cfg.limits;
    let nextMs = l.proberStatusMonitorIntervalMs;
    if (!this.healthy) {
      this.cfg.log.warn('prober detected unhealthy status', {
        'round-tripper-name': ROUND_TRIPPER_RAFT_MESSAGE,
        'remote-peer-id': hexId(this.cfg.peerId),
        rtt: formatGoDurationMs(this.srttMs),
        ...(this.lastError !== null ? { error: this.lastError } : {}),
      });
      nextMs = l.proberStatusErrorIntervalMs;
    }
    // etcd observes on every wake-up, healthy or not; before any probe has succeeded its SRTT is
    // a 0 that was never measured, which we leave out rather than count as a 0 s round trip.
    if (this.succeeded > 0) this.cfg.metrics.observeRoundTrip?.(this.cfg.peerId, this.srttMs / 1000);
    this.scheduleMonitor(nextMs);
  }
}
