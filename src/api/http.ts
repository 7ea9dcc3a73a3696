// HTTP/1.1 endpoints on the client URL, with etcd 3.6's bodies and status codes
// (server/etcdserver/api/etcdhttp: health.go, version, metrics).
import type http from 'node:http';
import type * as pb from '../pb/types';
import { AlarmRequest_AlarmAction, AlarmType } from '../pb/types';
import type { EtcdServerApi } from '../server/types';
import { createGateway } from './gateway';
import type { ApiLogger, MetricsHook } from './types';

export interface HttpHandlerOptions {
  /** Serves GET /metrics when set; 404 otherwise. */
  metrics?: MetricsHook;
  /** Told the outcome of every /health check (etcd_server_health_success / _failures). */
  onHealth?: (ok: boolean) => void;
  /** Bound on each read check of /livez and /readyz (etcd: the request timeout). */
  checkTimeoutMs?: number;
  /** etcd's --cors origins; default ['*'] as etcd's default. */
  corsOrigins?: string[];
  /** etcd's --enable-grpc-gateway (default true): JSON /v3/... endpoints. */
  enableGrpcGateway?: boolean;
}

/** etcd's request timeout at default settings: 5s + 2 * 1000 ms election timeout. */
export const DEFAULT_CHECK_TIMEOUT_MS = 7000;

type Check = () => Promise<void>;
/** The request listener, plus close() for the gateway's loopback gRPC clients. */
export type HttpHandler = ((req: http.IncomingMessage, res: http.ServerResponse) => void) & { close(): void };

const TEXT = 'text/plain; charset=utf-8';

/** Go's http.Error: text body plus newline, nosniff. */
function httpError(res: http.ServerResponse, status: number, body: string): void {
  res.writeHead(status, {
    'Content-Type': TEXT,
    'X-Content-Type-Options': 'nosniff',
    'Content-Length': Buffer.byteLength(body + '\n'),
  });
  res.end(body + '\n');
}

function methodNotAllowed(res: http.ServerResponse, allow: string): void {
  res.setHeader('Allow', allow);
  httpError(res, 405, 'Method Not Allowed');
}

function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error('context deadline exceeded')), ms);
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}

function errText(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

/** The read etcd's health checks issue: keys-only, limit 1. */
function probeRange(serializable: boolean): pb.RangeRequest {
  return {
    key: Buffer.from([0]),
    rangeEnd: Buffer.alloc(0),
    limit: '1',
    revision: '0',
    sortOrder: 0,
    sortTarget: 0,
    serializable,
    keysOnly: true,
    countOnly: false,
    minModRevision: '0',
    maxModRevision: '0',
    minCreateRevision: '0',
    maxCreateRevision: '0',
  };
}

function alarmName(alarm: number): string {
  for (const [name, v] of Object.entries(AlarmType)) if (v === alarm) return name;
  return String(alarm);
}

export function createHttpHandler(server: EtcdServerApi, log: ApiLogger, opts: HttpHandlerOptions = {}): HttpHandler {
  const timeoutMs = opts.checkTimeoutMs ?? DEFAULT_CHECK_TIMEOUT_MS;
  const readCheck = (serializable: boolean): Check => async () => {
    await withTimeout(server.range(probeRange(serializable)), timeoutMs);
  };
  const corruptionCheck: Check = async () => {
    const resp = await withTimeout(
      server.alarm({ action: AlarmRequest_AlarmAction.GET, memberID: '0', alarm: AlarmType.NONE }),
      timeoutMs,
    );
    if ((resp.alarms ?? []).some((a) => a.alarm === AlarmType.CORRUPT)) {
      throw new Error(`alarm activated: ${alarmName(AlarmType.CORRUPT)}`);
    }
  };
  const learnerCheck: Check = async () => {
    const st = await withTimeout(server.status({}), timeoutMs);
    if (st.isLearner) throw new Error('not supported for learner');
  };

  // Registration order is the order of the verbose listing.
  const registries: Record<string, [string, Check][]> = {
    livez: [['serializable_read', readCheck(true)]],
    readyz: [
      ['data_corruption', corruptionCheck],
      ['serializable_read', readCheck(true)],
      ['linearizable_read', readCheck(false)],
      ['non_learner', learnerCheck],
    ],
  };

  const serveHealth = async (url: URL, res: http.ServerResponse): Promise<void> => {
    const exclude = url.searchParams.getAll('exclude').filter((s) => s.length > 0);
    const serializable = url.searchParams.get('serializable') === 'true';
    let h: { ok: boolean; reason: string };
    try {
      h = await server.health({ serializable, exclude });
    } catch (e) {
      h = { ok: false, reason: `RANGE ERROR:${errText(e)}` };
    }
    opts.onHealth?.(h.ok);
    const body = JSON.stringify({ health: h.ok ? 'true' : 'false', reason: h.reason });
    if (!h.ok) {
      log.warn('/health error', { output: body, 'status-code': 503 });
      httpError(res, 503, body);
      return;
    }
    res.writeHead(200, { 'Content-Type': TEXT, 'Content-Length': Buffer.byteLength(body) });
    res.end(body);
  };

  const serveChecks = async (
    kind: string,
    checks: [string, Check][],
    url: URL,
    res: http.ServerResponse,
    applyExclude: boolean,
  ): Promise<void> => {
    let selected = checks;
    if (applyExclude) {
      const excluded = new Set(url.searchParams.getAll('exclude').filter((s) => s.length > 0));
      selected = checks.filter(([name]) => !excluded.has(name));
      const unknown = [...excluded].filter((x) => !checks.some(([name]) => name === x));
      if (unknown.length > 0) {
        log.warn('some health checks cannot be excluded', { 'missing-health-checks': unknown.map((u) => `"${u}"`).join(',') });
      }
    }
    let failed = false;
    let reason = '';
    for (const [name, check] of selected) {
      try {
        await check();
        reason += `[+]${name} ok\n`;
      } catch (e) {
        failed = true;
        reason += `[-]${name} failed: ${errText(e)}\n`;
      }
    }
    if (failed) {
      log.error('Health check error', { path: `/${kind}`, reason, 'status-code': 503 });
      httpError(res, 503, reason);
      return;
    }
    const body = (url.searchParams.has('verbose') ? reason : '') + 'ok\n';
    res.writeHead(200, {
      'Content-Type': TEXT,
      'X-Content-Type-Options': 'nosniff',
      'Content-Length': Buffer.byteLength(body),
    });
    res.end(body);
  };

  const serveVersion = (res: http.ServerResponse): void => {
    const body = JSON.stringify(server.versions());
    res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) });
    res.end(body);
  };

  const serveMetrics = async (hook: MetricsHook, res: http.ServerResponse): Promise<void> => {
    const m = await hook();
    res.writeHead(200, { 'Content-Type': m.contentType, 'Content-Length': Buffer.byteLength(m.body) });
    res.end(m.body);
  };

  const cors = new Set(opts.corsOrigins ?? ['*']);
  const gateway = opts.enableGrpcGateway === false ? undefined : createGateway(log);
  const addCors = (req: http.IncomingMessage, res: http.ServerResponse): void => {
    const origin = cors.has('*') ? '*' : req.headers.origin;
    if (origin === undefined || (origin !== '*' && !cors.has(origin))) return;
    res.setHeader('Access-Control-Allow-Methods', 'POST, GET, OPTIONS, PUT, DELETE');
    res.setHeader('Access-Control-Allow-Origin', origin);
    res.setHeader('Access-Control-Allow-Headers', 'accept, content-type, authorization');
  };

  const route = async (req: http.IncomingMessage, res: http.ServerResponse): Promise<void> => {
    const url = new URL(req.url ?? '/', 'http://localhost');
    const p = url.pathname;
    addCors(req, res);
    if (req.method === 'OPTIONS') {
      // etcd answers every preflight itself, before routing.
      res.writeHead(200, { 'Content-Length': 0 });
      res.end();
      return;
    }
    if (gateway?.handle(req, res)) return;
    if (p === '/health') {
      if (req.method !== 'GET') return methodNotAllowed(res, 'GET');
      return serveHealth(url, res);
    }
    const m = /^\/(livez|readyz)(?:\/([^/]+))?$/.exec(p);
    if (m) {
      const kind = m[1]!;
      const checks = registries[kind]!;
      const sub = m[2];
      const picked = sub === undefined ? checks : checks.filter(([name]) => name === sub);
      if (picked.length === 0) return httpError(res, 404, '404 page not found');
      if (req.method !== 'GET') return methodNotAllowed(res, 'GET');
      return serveChecks(kind, picked, url, res, sub === undefined);
    }
    if (p === '/version') {
      if (req.method !== 'GET') return methodNotAllowed(res, 'GET');
      return serveVersion(res);
    }
    if (p === '/metrics' && opts.metrics) return serveMetrics(opts.metrics, res);
    httpError(res, 404, '404 page not found');
  };

  const handler = (req: http.IncomingMessage, res: http.ServerResponse): void => {
    route(req, res).catch((e: unknown) => {
      log.error('http handler failed', { path: req.url, error: errText(e) });
      if (!res.headersSent) httpError(res, 500, 'Internal Server Error');
      else res.destroy();
    });
  };
  return Object.assign(handler, { close: () => gateway?.close() });
}
