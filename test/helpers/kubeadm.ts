// Runs etcd the way kubeadm's static pod does (its exact command line, kubeadm's certificates)
// and talks to it the way kube-apiserver does: gRPC over mutual TLS.
import assert from 'node:assert';
import type { ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import type { CertPair, KubeadmPki } from './certs';
import { releaseTempDir, spawnServer, stopGroup, trackTempDir } from './child';
import { REPO_ROOT } from './etcd-process';
import { freePort } from './ports';
import { sleepMs } from './wait';

export type Msg = Record<string, unknown>;
export type Service = 'KV' | 'Watch' | 'Lease' | 'Cluster' | 'Maintenance' | 'Auth';

export const REAL_ETCD = '/usr/bin/etcd';
export const OUR_ETCD = path.join(REPO_ROOT, 'bin', 'etcd');

export interface KubeadmMemberSpec {
  name: string;
  /** The node's address (kubeadm's advertise address); a 127.0.0.x loopback here. */
  ip: string;
  clientPort: number;
  peerPort: number;
  metricsPort: number;
}

/** Free ports for `n` members, each member on its own loopback address 127.0.0.(2+i). */
export async function memberSpecs(n: number): Promise<KubeadmMemberSpec[]> {
  const out: KubeadmMemberSpec[] = [];
  const used = new Set<number>();
  const take = async (): Promise<number> => {
    for (;;) {
      const p = await freePort();
      if (!used.has(p)) {
        used.add(p);
        return p;
      }
    }
  };
  for (let i = 0; i < n; i++) {
    out.push({ name: `kind-control-plane${i === 0 ? '' : i + 1}`, ip: `127.0.0.${2 + i}`, clientPort: await take(), peerPort: await take(), metricsPort: await take() });
  }
  return out;
}

/**
 * kubeadm's etcd static pod command (cmd/kubeadm/app/phases/etcd/local.go). `style` 'new' is
 * what kubeadm writes for etcd 3.6 (--feature-gates=InitialCorruptCheck=true,
 * --watch-progress-notify-interval); 'old' the etcd 3.4/3.5 form (--experimental-initial-corrupt-check,
 * --experimental-watch-progress-notify-interval), which the real etcd 3.4 here accepts too.
 */
export function kubeadmEtcdArgs(
  m: KubeadmMemberSpec,
  all: KubeadmMemberSpec[],
  pki: KubeadmPki,
  dataDir: string,
  style: 'new' | 'old',
  state: 'new' | 'existing' = 'new',
): string[] {
  const server = pki.server.get(m.name);
  const peer = pki.peer.get(m.name);
  assert(server !== undefined && peer !== undefined, `no certificates for ${m.name}`);
  const cluster = all.map((x) => `${x.name}=https://${x.ip}:${x.peerPort}`).join(',');
  const args = [
    `--advertise-client-urls=https://${m.ip}:${m.clientPort}`,
    `--cert-file=${server.cert}`,
    '--client-cert-auth=true',
    `--data-dir=${dataDir}`,
  ];
  // etcd 3.6 refuses a feature gate together with its experimental flag, so kubeadm writes one or the other.
  if (style === 'new') args.push('--feature-gates=InitialCorruptCheck=true');
  else args.push('--experimental-initial-corrupt-check=true', '--experimental-watch-progress-notify-interval=5s');
  args.push(
    `--initial-advertise-peer-urls=https://${m.ip}:${m.peerPort}`,
    `--initial-cluster=${cluster}`,
  );
  if (state === 'existing') args.push('--initial-cluster-state=existing');
  args.push(
    `--key-file=${server.key}`,
    `--listen-client-urls=https://127.0.0.1:${m.clientPort},https://${m.ip}:${m.clientPort}`,
    `--listen-metrics-urls=http://127.0.0.1:${m.metricsPort}`,
    `--listen-peer-urls=https://${m.ip}:${m.peerPort}`,
    `--name=${m.name}`,
    `--peer-cert-file=${peer.cert}`,
    '--peer-client-cert-auth=true',
    `--peer-key-file=${peer.key}`,
    `--peer-trusted-ca-file=${pki.ca.cert}`,
    '--snapshot-count=10000',
    `--trusted-ca-file=${pki.ca.cert}`,
  );
  if (style === 'new') args.push('--watch-progress-notify-interval=5s');
  return args;
}

const MAX_LOG_BYTES = 4 * 1024 * 1024;
const MAX_LIFETIME_SEC = 900;
export interface RunningEtcd {
  readonly proc: ChildProcess;
  logs(): string;
  stop(): Promise<void>;
}

/** Spawns `bin` with `args` (its own process group, bounded lifetime); does not wait for readiness. */
export function spawnEtcd(bin: string, args: string[]): RunningEtcd {
  let buf = '';
  const append = (chunk: Buffer): void => {
    buf += chunk.toString('utf8');
    if (buf.length > MAX_LOG_BYTES) buf = buf.slice(buf.length - MAX_LOG_BYTES);
  };
  const proc = spawnServer(bin, args, MAX_LIFETIME_SEC);
  proc.stdout?.on('data', append);
  proc.stderr?.on('data', append);
  proc.on('exit', (code, sig) => {
    append(Buffer.from(`--- exit code=${code} signal=${sig}\n`));
  });
  return {
    proc,
    logs: () => buf,
    stop: async () => {
      await stopGroup(proc, 10_000);
      const dir = args.find((a) => a.startsWith('--data-dir='))?.slice('--data-dir='.length);
      if (dir !== undefined) releaseTempDir(dir);
    },
  };
}

/** One HTTP GET (kubelet's probe): status and body, with a bound. */
export function httpGet(url: string, timeoutMs = 5_000): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.get(url, { timeout: timeoutMs }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => {
        body += c;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error(`GET ${url} timed out`)));
    req.on('error', reject);
  });
}

const PROTO = path.join(REPO_ROOT, 'node_modules', 'etcd3', 'proto', 'rpc.proto');
let pkg: grpc.GrpcObject | undefined;
function etcdserverpb(): grpc.GrpcObject {
  if (pkg === undefined) {
    const def = protoLoader.loadSync(PROTO, { keepCase: true, longs: String, enums: String, defaults: true, oneofs: true });
    pkg = grpc.loadPackageDefinition(def)['etcdserverpb'] as grpc.GrpcObject;
  }
  return pkg;
}

export interface ClientTls {
  ca: string;
  /** Omit to connect without a client certificate. */
  client?: CertPair;
}

type UnaryFn = (req: Msg, meta: grpc.Metadata, opts: grpc.CallOptions, cb: (err: grpc.ServiceError | null, res: Msg) => void) => unknown;
type StreamFn = (meta?: grpc.Metadata, opts?: grpc.CallOptions) => grpc.ClientDuplexStream<Msg, Msg>;

/** kube-apiserver's view of etcd: one gRPC channel over (mutual) TLS. */
export class KubeClient {
  private readonly clients = new Map<Service, grpc.Client>();

  constructor(target: string, tlsOpts: ClientTls | 'insecure', channelOpts: grpc.ChannelOptions = {}) {
    const creds =
      tlsOpts === 'insecure'
        ? grpc.credentials.createInsecure()
        : grpc.credentials.createSsl(
            fs.readFileSync(tlsOpts.ca),
            tlsOpts.client ? fs.readFileSync(tlsOpts.client.key) : null,
            tlsOpts.client ? fs.readFileSync(tlsOpts.client.cert) : null,
          );
    const opts: grpc.ChannelOptions = {
      'grpc.use_local_subchannel_pool': 1,
      'grpc.max_receive_message_length': 64 * 1024 * 1024,
      'grpc.initial_reconnect_backoff_ms': 200,
      'grpc.max_reconnect_backoff_ms': 1000,
      ...channelOpts,
    };
    const p = etcdserverpb();
    for (const s of ['KV', 'Watch', 'Lease', 'Cluster', 'Maintenance', 'Auth'] as const) {
      this.clients.set(s, new (p[s] as grpc.ServiceClientConstructor)(target, creds, opts));
    }
  }

  unary(service: Service, method: string, req: Msg, deadlineMs = 10_000, meta = new grpc.Metadata()): Promise<Msg> {
    const c = this.clients.get(service);
    assert(c !== undefined, 'client closed');
    const fn = (c as unknown as Record<string, UnaryFn>)[method];
    assert(typeof fn === 'function', `no ${service}.${method}`);
    return new Promise((resolve, reject) => {
      fn.call(c, req, meta, { deadline: Date.now() + deadlineMs }, (err, res) => (err ? reject(err) : resolve(res)));
    });
  }

  bidi(service: Service, method: string, meta = new grpc.Metadata()): grpc.ClientDuplexStream<Msg, Msg> {
    const c = this.clients.get(service);
    assert(c !== undefined, 'client closed');
    const fn = (c as unknown as Record<string, StreamFn>)[method];
    assert(typeof fn === 'function', `no ${service}.${method}`);
    return fn.call(c, meta);
  }

  /** The underlying channel state (READY=2, TRANSIENT_FAILURE=3...). */
  channelState(): grpc.connectivityState {
    const c = this.clients.get('KV');
    assert(c !== undefined);
    return c.getChannel().getConnectivityState(false);
  }

  close(): void {
    for (const c of this.clients.values()) c.close();
    this.clients.clear();
  }
}

/** A kube-apiserver-like client with the apiserver-etcd-client certificate. */
export function apiserverClient(target: string, pki: KubeadmPki, channelOpts: grpc.ChannelOptions = {}): KubeClient {
  return new KubeClient(target, { ca: pki.ca.cert, client: pki.apiserverEtcdClient }, channelOpts);
}

/** Waits until a Range through mutual TLS succeeds, or the process dies, or the bound passes. */
export async function waitServing(e: RunningEtcd, target: string, pki: KubeadmPki, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  const c = apiserverClient(target, pki);
  try {
    for (;;) {
      if (e.proc.exitCode !== null || e.proc.signalCode !== null) {
        throw new Error(`etcd exited during start-up\n${e.logs().slice(-6000)}`);
      }
      try {
        await c.unary('KV', 'Range', { key: Buffer.from('/registry/health') }, 1_000);
        return;
      } catch {
        // not yet
      }
      if (Date.now() > deadline) throw new Error(`etcd not serving within ${timeoutMs} ms\n${e.logs().slice(-6000)}`);
      await sleepMs(100);
    }
  } finally {
    c.close();
  }
}

/** A fresh data dir; spawnEtcd's stop() removes it once the member it was given to is gone. */
export function tempDataDir(): string {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), 'kubeadm-etcd-'));
  trackTempDir(d);
  return d;
}

export interface KubeadmCluster {
  specs: KubeadmMemberSpec[];
  members: RunningEtcd[];
  pki: KubeadmPki;
  /** `127.0.0.1:<client port>` per member: each control-plane node's apiserver talks to its own member. */
  targets: string[];
  logs(): string;
  stop(): Promise<void>;
}

/**
 * kubeadm's stacked etcd on `n` control-plane nodes: certificates for every node, each member
 * started with kubeadm's command line for the full initial cluster, all serving mutual TLS.
 */
export async function startKubeadmCluster(
  bin: string,
  n: number,
  style: 'new' | 'old',
  makePki: (members: Array<{ name: string; ips: string[] }>) => KubeadmPki,
  readyTimeoutMs = 60_000,
): Promise<KubeadmCluster> {
  // memberSpecs() hands out ports that were free a moment ago; another test's server can take one
  // before a member binds it. Such a start is retried on fresh ports (bounded); any other failure
  // is the test's.
  for (let attempt = 1; ; attempt++) {
    try {
      return await startKubeadmClusterOnce(bin, n, style, makePki, readyTimeoutMs);
    } catch (e) {
      if (attempt >= MAX_START_ATTEMPTS || !/EADDRINUSE|address already in use/.test((e as Error).message)) throw e;
    }
  }
}

const MAX_START_ATTEMPTS = 3;

async function startKubeadmClusterOnce(
  bin: string,
  n: number,
  style: 'new' | 'old',
  makePki: (members: Array<{ name: string; ips: string[] }>) => KubeadmPki,
  readyTimeoutMs: number,
): Promise<KubeadmCluster> {
  const specs = await memberSpecs(n);
  const pki = makePki(specs.map((s) => ({ name: s.name, ips: [s.ip] })));
  const dirs = specs.map(() => tempDataDir());
  const members = specs.map((s, i) => spawnEtcd(bin, kubeadmEtcdArgs(s, specs, pki, dirs[i]!, style)));
  const targets = specs.map((s) => `127.0.0.1:${s.clientPort}`);
  const logs = (): string => members.map((m, i) => `=== ${specs[i]!.name}\n${m.logs().slice(-6000)}`).join('\n');
  const stop = async (): Promise<void> => {
    await Promise.all(members.map((m) => m.stop()));
    for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
    fs.rmSync(pki.dir, { recursive: true, force: true });
  };
  try {
    await Promise.all(members.map((m, i) => waitServing(m, targets[i]!, pki, readyTimeoutMs)));
  } catch (e) {
    const text = `${(e as Error).message.split('\n')[0]}\n${logs()}`;
    await stop();
    throw new Error(text);
  }
  return { specs, members, pki, targets, logs, stop };
}
