// Entry point of bin/etcd: parse etcd's command line, start the member, serve clients.
import http from 'node:http';
import os from 'node:os';
import * as grpcjs from '@grpc/grpc-js';
import https from 'node:https';
import type tls from 'node:tls';
import { emitNotices, loggerForConfig, parseConfig, reportParseResult } from './config';
import type { Config } from './config/types';
import { logProcessWarnings, type Logger } from './log';
import { EtcdServer, type ServerConfig } from './server/server';
import { createGrpcServer } from './api/grpc_server';
import { createHttpHandler } from './api/http';
import { listenClientUrls, type ClientListeners } from './api/listener';
import { idToHex } from './membership/ids';
import { createMetrics } from './metrics';
import { admitVerifiedPeer, channelCredentials, listenPeerTls, logRejected, resolveMemberTls, serverCredentials, serverTlsOptions, TLS_FLAGS, type MemberTls, type TlsMaterial } from './tls';
import { ServerCredentials } from '@grpc/grpc-js';
import { servePeerUrls, type PeerServer } from './transport';
import { startIdleGc } from './runtime/idle_gc';
import { warmUpWritePath, WARM_UP_DEFAULTS } from './server/warmup';

const grpcInsecureServer = (): ServerCredentials => ServerCredentials.createInsecure();

/** The storage format/cluster version we report alongside the emulated server version. */
function clusterVersionOf(version: string): string {
  const [maj, min] = version.split('.');
  return `${maj}.${min}.0`;
}

function serverConfig(c: Config): ServerConfig {
  const initialCluster = new Map<string, string[]>();
  for (const [name, urls] of c.initialCluster) initialCluster.set(name, urls.map((u) => u.text));
  return {
    name: c.name,
    dataDir: c.dataDir,
    walDir: c.walDir,
    bcryptCost: c.bcryptCost,
    initialAdvertisePeerUrls: c.initialAdvertisePeerUrls.map((u) => u.text),
    advertiseClientUrls: c.advertiseClientUrls.map((u) => u.text),
    initialCluster,
    initialClusterState: c.initialClusterState,
    initialClusterToken: c.initialClusterToken,
    maxRequestBytes: c.maxRequestBytes,
    maxTxnOps: c.maxTxnOps,
    quotaBackendBytes: Number.isFinite(c.quotaBackendBytes) ? c.quotaBackendBytes : 0,
    snapshotCount: c.snapshotCount,
    snapshotCatchUpEntries: c.snapshotCatchUpEntries,
    heartbeatIntervalMs: c.heartbeatIntervalMs,
    electionTimeoutMs: c.electionTimeoutMs,
    watchProgressNotifyIntervalMs: c.watchProgressNotifyIntervalMs,
    version: c.emulatedEtcdVersion,
    clusterVersion: clusterVersionOf(c.emulatedEtcdVersion),
    authToken: c.authToken,
    authTokenTtlSec: c.authTokenTtlSec,
    warningApplyDurationMs: c.warningApplyDurationMs,
    backendBatchIntervalMs: Math.round(c.backendBatchIntervalMs),
    backendBatchLimit: c.backendBatchLimit,
    unsafeNoFsync: c.unsafeNoFsync,
    autoCompaction: {
      mode: c.autoCompactionMode,
      retentionMs: c.autoCompactionRetentionMs,
      retentionRevisions: c.autoCompactionRetentionRevisions,
    },
  };
}

/** HTTP/1.1 listeners for --listen-metrics-urls; https:// with `tlsMaterial`. */
async function listenPlainHttp(
  urls: string[],
  handler: http.RequestListener,
  log: Logger,
  what: string,
  tlsMaterial: TlsMaterial | undefined,
): Promise<http.Server[]> {
  const servers: http.Server[] = [];
  for (const raw of urls) {
    const u = new URL(raw);
    if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new Error(`${what} URL ${raw}: scheme must be http or https`);
    let s: http.Server;
    if (u.protocol === 'https:') {
      if (tlsMaterial === undefined) throw new Error(`cannot listen on TLS for ${u.host}: KeyFile and CertFile are not presented`);
      const hs = https.createServer({ ...serverTlsOptions(tlsMaterial, ['http/1.1']), handshakeTimeout: 10_000 }, handler);
      hs.on('tlsClientError', (err: Error, sock) => {
        logRejected(log, sock, err);
        sock.destroy();
      });
      // etcd's checks after the handshake (CRL serials, allowed hostname), as on the client URLs;
      // a rejected socket is destroyed before the HTTP parser has read anything.
      const material = tlsMaterial;
      hs.on('secureConnection', (sock: tls.TLSSocket) => admitVerifiedPeer(material, sock, log));
      s = hs;
    } else {
      s = http.createServer(handler);
    }
    await new Promise<void>((resolve, reject) => {
      s.once('error', reject);
      s.listen(Number(u.port), u.hostname.replace(/^\[|\]$/g, ''), () => resolve());
    });
    log.info(`serving ${what}`, { address: raw });
    servers.push(s);
  }
  return servers;
}

export async function main(argv: string[], env: NodeJS.ProcessEnv): Promise<number> {
  const parsed = parseConfig(argv, env);
  if (parsed.kind !== 'run') return reportParseResult(parsed);
  const c = parsed.config;
  const log = loggerForConfig(c);
  logProcessWarnings(log);
  emitNotices(log, parsed.notices);
  for (const f of c.acceptedButIgnored) {
    if (!TLS_FLAGS.has(f)) log.info('flag accepted but not acted on', { flag: f });
  }
  if (c.initialClusterError) {
    log.error('discovery failed', { error: `error setting up initial cluster: ${c.initialClusterError}` });
    return 1;
  }
  log.info('starting an etcd server', {
    'etcd-version': c.emulatedEtcdVersion,
    'node-version': process.version,
    'data-dir': c.dataDir,
    name: c.name,
    'listen-client-urls': c.listenClientUrls.map((u) => u.text),
    'advertise-client-urls': c.advertiseClientUrls.map((u) => u.text),
    'initial-cluster': c.initialClusterText,
  });
  // From the start: the heap grows most while the applied state is read back (a restart), and that
  // growth counts too. Unref'd, so an early return below does not wait for it.
  const idleGc = startIdleGc();

  let memberTls: MemberTls;
  try {
    memberTls = resolveMemberTls(c, log);
  } catch (e) {
    log.error('failed to load TLS configuration', { error: (e as Error).message });
    return 1;
  }

  const metrics = createMetrics({ serverVersion: c.emulatedEtcdVersion, extensive: c.metrics === 'extensive' });
  let server: EtcdServer;
  try {
    const peerTls = memberTls.peer;
    const clientTls = memberTls.client;
    const insecure = grpcjs.credentials.createInsecure();
    server = await EtcdServer.start(
      {
        ...serverConfig(c),
        peerCredentials: peerTls ? (secure) => (secure ? channelCredentials(peerTls) : insecure) : undefined,
        clientCredentials: clientTls ? (secure) => (secure ? channelCredentials(clientTls) : insecure) : undefined,
      },
      log,
      metrics,
    );
  } catch (e) {
    log.error('failed to start etcd server', { error: (e as Error).message });
    return 1;
  }
  // The WAL's replay and the key index's rebuild leave their garbage behind; nothing is served yet.
  idleGc.recovered();

  const http2Options = {
    keepaliveIntervalMs: c.grpcKeepAliveIntervalMs,
    keepaliveTimeoutMs: c.grpcKeepAliveTimeoutMs,
    keepaliveMinTimeMs: c.grpcKeepAliveMinTimeMs,
    maxConcurrentStreams: c.maxConcurrentStreams > 0 && c.maxConcurrentStreams < 2 ** 31 ? c.maxConcurrentStreams : undefined,
  };
  const grpc = createGrpcServer(server, log, { ...http2Options, metrics });
  const metricsHook = () => metrics.metricsText();
  const onHealth = (ok: boolean): void => (ok ? metrics.server.healthSuccess : metrics.server.healthFailures).inc();
  const httpHandler = createHttpHandler(server, log, { metrics: metricsHook, onHealth, checkTimeoutMs: server.requestTimeoutMs });
  // The JSON gateway calls back into gRPC, which only the client URLs serve.
  const plainHandler = createHttpHandler(server, log, { metrics: metricsHook, onHealth, checkTimeoutMs: server.requestTimeoutMs, enableGrpcGateway: false });

  let clients: ClientListeners;
  let others: http.Server[] = [];
  let peers: PeerServer | null = null;
  try {
    clients = await listenClientUrls(c.listenClientUrls.map((u) => u.text), grpc.grpcServer, httpHandler, log, {
      tls: memberTls.client,
      http2: http2Options,
      onHttp2CutOff: (reason) => metrics.network.http2CutOffs.labels('client', reason).inc(),
    });
    // etcd serves https:// metrics URLs with the client TLS settings (client-cert-auth included).
    others = others.concat(await listenPlainHttp(c.listenMetricsUrls.map((u) => u.text), plainHandler, log, 'metrics', memberTls.client));
    const peerTls = memberTls.peer;
    peers = await servePeerUrls(c.listenPeerUrls.map((u) => u.text), server.transport, {
      credentials: peerTls === undefined ? undefined : (secure) => (secure ? serverCredentials(peerTls) : grpcInsecureServer()),
      // TLS ended by us, so that etcd's checks after the handshake apply on the peer port too.
      listenSecure: peerTls === undefined ? undefined : (target, accept) => listenPeerTls(target, peerTls, log, accept),
      onProtocolError: (message) => log.debug('peer HTTP/2 protocol error', { error: message }),
      onCutOff: (reason) => metrics.network.http2CutOffs.labels('peer', reason).inc(),
    });
    for (const u of c.listenPeerUrls) log.info('serving peer traffic', { address: u.text });
  } catch (e) {
    log.error('failed to listen', { error: (e as Error).message });
    await server.stop();
    return 1;
  }

  try {
    await server.waitReady(60_000);
  } catch (e) {
    log.error('member did not become ready', { error: (e as Error).message });
  }
  grpc.setServing(true);
  log.info('ready to serve client requests', {});
  log.info('member is ready', { 'local-member-id': idToHex(server.memberId), 'cluster-id': idToHex(server.clusterId) });
  // A fresh process's first writes run in V8's interpreter: run the write path's code once on a
  // scratch store, between the first requests (src/server/warmup.ts).
  const warmUpStop = new AbortController();
  const warmUp =
    env.ETCDTS_WARM_UP === '0'
      ? Promise.resolve()
      : warmUpWritePath({ tmpDir: os.tmpdir(), ...WARM_UP_DEFAULTS, log, signal: warmUpStop.signal }).then((w) => {
          if (w) log.debug('warmed up the write path on a scratch store', { puts: w.puts, took: `${w.ms.toFixed(1)}ms` });
        });

  return new Promise<number>((resolve) => {
    let closing = false;
    const shutdown = (signal: string): void => {
      if (closing) return;
      closing = true;
      log.info('received signal; shutting down', { signal });
      idleGc.stop();
      warmUpStop.abort();
      const done = async (): Promise<void> => {
        // At most one step of it left: it stops between transactions and removes its store.
        await warmUp;
        grpc.setServing(false);
        await Promise.race([clients.close(), new Promise((r) => setTimeout(r, 2000))]);
        for (const s of others) s.close();
        await peers?.shutdown();
        grpc.close();
        httpHandler.close();
        plainHandler.close();
        grpc.grpcServer.forceShutdown();
        await server.stop();
        log.info('stopped etcd server');
      };
      done().then(() => resolve(0), (e) => {
        log.error('error during shutdown', { error: String(e) });
        resolve(1);
      });
    };
    process.once('SIGINT', () => shutdown('SIGINT'));
    process.once('SIGTERM', () => shutdown('SIGTERM'));
  });
}

if (require.main === module) {
  main(process.argv.slice(2), process.env).then(
    (code) => process.exit(code),
    (e) => {
      process.stderr.write(`${(e as Error).stack ?? String(e)}\n`);
      process.exit(1);
    },
  );
}
