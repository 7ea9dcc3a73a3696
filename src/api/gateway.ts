// etcd's JSON gRPC gateway (/v3/...): HTTP/1.1 JSON in, a gRPC call to our own client port,
// JSON out. etcd does the same (grpc-gateway v1 dialing its own listener), so validation,
// errors and auth stay those of the gRPC services. JSON as grpc-gateway v1's default
// marshaler: proto field names, int64 as strings, bytes as base64, zero values left out.
import path from 'node:path';
import type http from 'node:http';
import * as grpc from '@grpc/grpc-js';
import protobuf from 'protobufjs';
import { PROTO_FILES, protoDir } from '../pb/load';
import { parseGatewayJson } from './gateway_json';
import { localTargetOf } from './local_target';
import type { ApiLogger } from './types';

type Kind = 'unary' | 'bidi' | 'serverStream';
interface Route {
  /** Full gRPC method path, e.g. /etcdserverpb.KV/Range. */
  method: string;
  request: string;
  response: string;
  kind: Kind;
}

function r(service: string, method: string, req: string, res: string, kind: Kind = 'unary'): Route {
  return { method: `/${service}/${method}`, request: req, response: res, kind };
}
const E = 'etcdserverpb.';
const L = 'v3lockpb.';
const V = 'v3electionpb.';

/** etcd 3.6's gateway paths (rpc.proto google.api.http options). */
const ROUTES: Record<string, Route> = {
  '/v3/kv/range': r('etcdserverpb.KV', 'Range', E + 'RangeRequest', E + 'RangeResponse'),
  '/v3/kv/put': r('etcdserverpb.KV', 'Put', E + 'PutRequest', E + 'PutResponse'),
  '/v3/kv/deleterange': r('etcdserverpb.KV', 'DeleteRange', E + 'DeleteRangeRequest', E + 'DeleteRangeResponse'),
  '/v3/kv/txn': r('etcdserverpb.KV', 'Txn', E + 'TxnRequest', E + 'TxnResponse'),
  '/v3/kv/compaction': r('etcdserverpb.KV', 'Compact', E + 'CompactionRequest', E + 'CompactionResponse'),
  '/v3/watch': r('etcdserverpb.Watch', 'Watch', E + 'WatchRequest', E + 'WatchResponse', 'bidi'),
  '/v3/lease/grant': r('etcdserverpb.Lease', 'LeaseGrant', E + 'LeaseGrantRequest', E + 'LeaseGrantResponse'),
  '/v3/lease/revoke': r('etcdserverpb.Lease', 'LeaseRevoke', E + 'LeaseRevokeRequest', E + 'LeaseRevokeResponse'),
  '/v3/kv/lease/revoke': r('etcdserverpb.Lease', 'LeaseRevoke', E + 'LeaseRevokeRequest', E + 'LeaseRevokeResponse'),
  '/v3/lease/keepalive': r('etcdserverpb.Lease', 'LeaseKeepAlive', E + 'LeaseKeepAliveRequest', E + 'LeaseKeepAliveResponse', 'bidi'),
  '/v3/lease/timetolive': r('etcdserverpb.Lease', 'LeaseTimeToLive', E + 'LeaseTimeToLiveRequest', E + 'LeaseTimeToLiveResponse'),
  '/v3/kv/lease/timetolive': r('etcdserverpb.Lease', 'LeaseTimeToLive', E + 'LeaseTimeToLiveRequest', E + 'LeaseTimeToLiveResponse'),
  '/v3/lease/leases': r('etcdserverpb.Lease', 'LeaseLeases', E + 'LeaseLeasesRequest', E + 'LeaseLeasesResponse'),
  '/v3/kv/lease/leases': r('etcdserverpb.Lease', 'LeaseLeases', E + 'LeaseLeasesRequest', E + 'LeaseLeasesResponse'),
  '/v3/cluster/member/add': r('etcdserverpb.Cluster', 'MemberAdd', E + 'MemberAddRequest', E + 'MemberAddResponse'),
  '/v3/cluster/member/remove': r('etcdserverpb.Cluster', 'MemberRemove', E + 'MemberRemoveRequest', E + 'MemberRemoveResponse'),
  '/v3/cluster/member/update': r('etcdserverpb.Cluster', 'MemberUpdate', E + 'MemberUpdateRequest', E + 'MemberUpdateResponse'),
  '/v3/cluster/member/list': r('etcdserverpb.Cluster', 'MemberList', E + 'MemberListRequest', E + 'MemberListResponse'),
  '/v3/cluster/member/promote': r('etcdserverpb.Cluster', 'MemberPromote', E + 'MemberPromoteRequest', E + 'MemberPromoteResponse'),
  '/v3/maintenance/alarm': r('etcdserverpb.Maintenance', 'Alarm', E + 'AlarmRequest', E + 'AlarmResponse'),
  '/v3/maintenance/status': r('etcdserverpb.Maintenance', 'Status', E + 'StatusRequest', E + 'StatusResponse'),
  '/v3/maintenance/defragment': r('etcdserverpb.Maintenance', 'Defragment', E + 'DefragmentRequest', E + 'DefragmentResponse'),
  '/v3/maintenance/hash': r('etcdserverpb.Maintenance', 'Hash', E + 'HashRequest', E + 'HashResponse'),
  '/v3/maintenance/hashkv': r('etcdserverpb.Maintenance', 'HashKV', E + 'HashKVRequest', E + 'HashKVResponse'),
  '/v3/maintenance/snapshot': r('etcdserverpb.Maintenance', 'Snapshot', E + 'SnapshotRequest', E + 'SnapshotResponse', 'serverStream'),
  '/v3/maintenance/transfer-leadership': r('etcdserverpb.Maintenance', 'MoveLeader', E + 'MoveLeaderRequest', E + 'MoveLeaderResponse'),
  '/v3/maintenance/downgrade': r('etcdserverpb.Maintenance', 'Downgrade', E + 'DowngradeRequest', E + 'DowngradeResponse'),
  '/v3/auth/enable': r('etcdserverpb.Auth', 'AuthEnable', E + 'AuthEnableRequest', E + 'AuthEnableResponse'),
  '/v3/auth/disable': r('etcdserverpb.Auth', 'AuthDisable', E + 'AuthDisableRequest', E + 'AuthDisableResponse'),
  '/v3/auth/status': r('etcdserverpb.Auth', 'AuthStatus', E + 'AuthStatusRequest', E + 'AuthStatusResponse'),
  '/v3/auth/authenticate': r('etcdserverpb.Auth', 'Authenticate', E + 'AuthenticateRequest', E + 'AuthenticateResponse'),
  '/v3/auth/user/add': r('etcdserverpb.Auth', 'UserAdd', E + 'AuthUserAddRequest', E + 'AuthUserAddResponse'),
  '/v3/auth/user/get': r('etcdserverpb.Auth', 'UserGet', E + 'AuthUserGetRequest', E + 'AuthUserGetResponse'),
  '/v3/auth/user/list': r('etcdserverpb.Auth', 'UserList', E + 'AuthUserListRequest', E + 'AuthUserListResponse'),
  '/v3/auth/user/delete': r('etcdserverpb.Auth', 'UserDelete', E + 'AuthUserDeleteRequest', E + 'AuthUserDeleteResponse'),
  '/v3/auth/user/changepw': r('etcdserverpb.Auth', 'UserChangePassword', E + 'AuthUserChangePasswordRequest', E + 'AuthUserChangePasswordResponse'),
  '/v3/auth/user/grant': r('etcdserverpb.Auth', 'UserGrantRole', E + 'AuthUserGrantRoleRequest', E + 'AuthUserGrantRoleResponse'),
  '/v3/auth/user/revoke': r('etcdserverpb.Auth', 'UserRevokeRole', E + 'AuthUserRevokeRoleRequest', E + 'AuthUserRevokeRoleResponse'),
  '/v3/auth/role/add': r('etcdserverpb.Auth', 'RoleAdd', E + 'AuthRoleAddRequest', E + 'AuthRoleAddResponse'),
  '/v3/auth/role/get': r('etcdserverpb.Auth', 'RoleGet', E + 'AuthRoleGetRequest', E + 'AuthRoleGetResponse'),
  '/v3/auth/role/list': r('etcdserverpb.Auth', 'RoleList', E + 'AuthRoleListRequest', E + 'AuthRoleListResponse'),
  '/v3/auth/role/delete': r('etcdserverpb.Auth', 'RoleDelete', E + 'AuthRoleDeleteRequest', E + 'AuthRoleDeleteResponse'),
  '/v3/auth/role/grant': r('etcdserverpb.Auth', 'RoleGrantPermission', E + 'AuthRoleGrantPermissionRequest', E + 'AuthRoleGrantPermissionResponse'),
  '/v3/auth/role/revoke': r('etcdserverpb.Auth', 'RoleRevokePermission', E + 'AuthRoleRevokePermissionRequest', E + 'AuthRoleRevokePermissionResponse'),
  '/v3/lock/lock': r('v3lockpb.Lock', 'Lock', L + 'LockRequest', L + 'LockResponse'),
  '/v3/lock/unlock': r('v3lockpb.Lock', 'Unlock', L + 'UnlockRequest', L + 'UnlockResponse'),
  '/v3/election/campaign': r('v3electionpb.Election', 'Campaign', V + 'CampaignRequest', V + 'CampaignResponse'),
  '/v3/election/proclaim': r('v3electionpb.Election', 'Proclaim', V + 'ProclaimRequest', V + 'ProclaimResponse'),
  '/v3/election/leader': r('v3electionpb.Election', 'Leader', V + 'LeaderRequest', V + 'LeaderResponse'),
  '/v3/election/observe': r('v3electionpb.Election', 'Observe', V + 'LeaderRequest', V + 'LeaderResponse', 'serverStream'),
  '/v3/election/resign': r('v3electionpb.Election', 'Resign', V + 'ResignRequest', V + 'ResignResponse'),
};

/** grpc-gateway v1's HTTPStatusFromCode. */
const HTTP_STATUS: Record<number, number> = {
  0: 200, 1: 408, 2: 500, 3: 400, 4: 504, 5: 404, 6: 409, 7: 403, 8: 429,
  9: 400, 10: 409, 11: 400, 12: 501, 13: 500, 14: 503, 15: 500, 16: 401,
};

/** Bound on a gateway request body (JSON of a max-size request stays well under it). */
export const MAX_GATEWAY_BODY_BYTES = 64 * 1024 * 1024;
/** Clients to our own listeners, one per local address seen. */
const MAX_GATEWAY_CLIENTS = 16;

let cachedRoot: protobuf.Root | undefined;
function root(): protobuf.Root {
  if (cachedRoot === undefined) {
    const dir = protoDir();
    const rt = new protobuf.Root();
    rt.resolvePath = (_origin, target) => (path.isAbsolute(target) ? target : path.join(dir, target));
    rt.loadSync([...PROTO_FILES], { keepCase: true });
    rt.resolveAll();
    cachedRoot = rt;
  }
  return cachedRoot;
}

function lowerCamel(name: string): string {
  return name.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());
}

/** Accepts proto names and JSON (lowerCamel) names, as jsonpb does; unknown fields are dropped. */
function normalize(type: protobuf.Type, obj: unknown): Record<string, unknown> {
  if (obj === null || typeof obj !== 'object' || Array.isArray(obj)) throw new Error('request body must be a JSON object');
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(obj as Record<string, unknown>)) {
    const field = type.fields[k] ?? type.fieldsArray.find((f) => lowerCamel(f.name) === k || f.options?.json_name === k);
    if (!field || v === null) continue;
    const rt = field.resolvedType;
    if (rt instanceof protobuf.Type) {
      out[field.name] = field.repeated && Array.isArray(v) ? v.map((x) => normalize(rt, x)) : normalize(rt, v);
    } else {
      out[field.name] = v;
    }
  }
  return out;
}

function encodeJson(typeName: string, json: unknown): Buffer {
  const type = root().lookupType(typeName);
  const msg = type.fromObject(normalize(type, json));
  return Buffer.from(type.encode(msg).finish());
}

function decodeToJson(typeName: string, bytes: Buffer): unknown {
  const type = root().lookupType(typeName);
  return type.toObject(type.decode(bytes), { longs: String, enums: String, bytes: String, defaults: false });
}

const passthrough = (b: Buffer): Buffer => b;

/** Bound on the metadata entries forwarded from one request's headers. */
const MAX_FORWARDED_HEADERS = 64;

/**
 * grpc-gateway v1's header forwarding: `Authorization` (etcd's server takes the token from it when
 * there is no `token` entry) and `Grpc-Metadata-<name>` headers, as metadata `<name>`.
 */
function metadataOf(req: http.IncomingMessage): grpc.Metadata {
  const md = new grpc.Metadata();
  let n = 0;
  for (const [name, value] of Object.entries(req.headers)) {
    if (value === undefined || n >= MAX_FORWARDED_HEADERS) continue;
    const key = name === 'authorization' ? name : name.startsWith('grpc-metadata-') ? name.slice('grpc-metadata-'.length) : '';
    // Binary (-bin) entries would need base64 handling; grpc-gateway v1 forwards them as text too,
    // which grpc-js refuses, so they are left out.
    if (key === '' || key.endsWith('-bin') || !/^[0-9a-z_.-]+$/.test(key)) continue;
    for (const v of Array.isArray(value) ? value : [value]) md.add(key, v);
    n++;
  }
  return md;
}

function writeJson(res: http.ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(text) });
  res.end(text);
}

function writeText(res: http.ServerResponse, status: number, text: string): void {
  const body = text + '\n';
  res.writeHead(status, {
    'Content-Type': 'text/plain; charset=utf-8',
    'X-Content-Type-Options': 'nosniff',
    'Content-Length': Buffer.byteLength(body),
  });
  res.end(body);
}

function statusOf(e: unknown): { code: number; message: string } {
  const o = e as { code?: unknown; details?: unknown; message?: unknown };
  const code = typeof o?.code === 'number' ? o.code : grpc.status.UNKNOWN;
  const message = typeof o?.details === 'string' ? o.details : e instanceof Error ? e.message : String(e);
  return { code, message };
}

function writeGrpcError(res: http.ServerResponse, e: unknown): void {
  const { code, message } = statusOf(e);
  writeJson(res, HTTP_STATUS[code] ?? 500, { error: message, message, code });
}

/** Splits a byte stream of concatenated JSON values (a gateway stream body) into values. */
class JsonSplitter {
  private buf = '';
  private depth = 0;
  private inString = false;
  private escaped = false;
  private start = -1;
  private scanned = 0;

  push(chunk: string): string[] {
    this.buf += chunk;
    const out: string[] = [];
    for (let i = this.scanned; i < this.buf.length; i++) {
      const ch = this.buf[i];
      if (this.inString) {
        if (this.escaped) this.escaped = false;
        else if (ch === '\\') this.escaped = true;
        else if (ch === '"') this.inString = false;
        continue;
      }
      if (ch === '"') this.inString = true;
      else if (ch === '{' || ch === '[') {
        if (this.depth === 0) this.start = i;
        this.depth++;
      } else if (ch === '}' || ch === ']') {
        this.depth--;
        if (this.depth === 0 && this.start >= 0) {
          out.push(this.buf.slice(this.start, i + 1));
          this.start = -1;
        }
      }
    }
    if (this.depth === 0) {
      this.buf = '';
      this.scanned = 0;
    } else {
      this.buf = this.buf.slice(this.start);
      this.scanned = this.buf.length;
      this.start = 0;
    }
    return out;
  }
}

export interface Gateway {
  /** True when the request was a gateway path (and has been answered). */
  handle(req: http.IncomingMessage, res: http.ServerResponse): boolean;
  close(): void;
}

export function createGateway(log: ApiLogger): Gateway {
  const clients = new Map<string, grpc.Client>();
  const clientFor = (target: string): grpc.Client => {
    let c = clients.get(target);
    if (!c) {
      if (clients.size >= MAX_GATEWAY_CLIENTS) {
        const [oldest, oc] = clients.entries().next().value as [string, grpc.Client];
        oc.close();
        clients.delete(oldest);
      }
      c = new grpc.Client(target, grpc.credentials.createInsecure(), {
        'grpc.max_receive_message_length': -1,
        'grpc.max_send_message_length': -1,
      });
      clients.set(target, c);
    }
    return c;
  };

  const readBody = (req: http.IncomingMessage): Promise<string> =>
    new Promise((resolve, reject) => {
      const parts: Buffer[] = [];
      let size = 0;
      req.on('data', (d: Buffer) => {
        size += d.length;
        if (size > MAX_GATEWAY_BODY_BYTES) {
          reject(Object.assign(new Error('request body too large'), { code: grpc.status.RESOURCE_EXHAUSTED }));
          req.destroy();
          return;
        }
        parts.push(d);
      });
      req.on('end', () => resolve(Buffer.concat(parts).toString('utf8')));
      req.on('error', reject);
    });

  const unary = async (route: Route, client: grpc.Client, req: http.IncomingMessage, res: http.ServerResponse): Promise<void> => {
    let payload: Buffer;
    try {
      const text = await readBody(req);
      payload = encodeJson(route.request, text.trim() === '' ? {} : parseGatewayJson(text));
    } catch (e) {
      const { code } = statusOf(e);
      const message = e instanceof Error ? e.message : String(e);
      writeGrpcError(res, { code: code === grpc.status.UNKNOWN ? grpc.status.INVALID_ARGUMENT : code, details: message });
      return;
    }
    client.makeUnaryRequest(route.method, passthrough, passthrough, payload, metadataOf(req), (err, out) => {
      if (err) return writeGrpcError(res, err);
      writeJson(res, 200, decodeToJson(route.response, out ?? Buffer.alloc(0)));
    });
  };

  const streamOut = (route: Route, res: http.ServerResponse, call: grpc.ClientReadableStream<Buffer>): void => {
    res.writeHead(200, { 'Content-Type': 'application/json', 'Transfer-Encoding': 'chunked' });
    call.on('data', (b: Buffer) => {
      if (!res.write(JSON.stringify({ result: decodeToJson(route.response, b) }) + '\n')) {
        call.pause();
        res.once('drain', () => call.resume());
      }
    });
    call.on('error', (e: unknown) => {
      const { code, message } = statusOf(e);
      if (code !== grpc.status.CANCELLED) {
        const httpCode = HTTP_STATUS[code] ?? 500;
        res.write(JSON.stringify({ error: { grpc_code: code, http_code: httpCode, message, http_status: httpStatusText(httpCode) } }) + '\n');
      }
      res.end();
    });
    call.on('end', () => res.end());
    res.on('close', () => call.cancel());
  };

  const bidi = (route: Route, client: grpc.Client, req: http.IncomingMessage, res: http.ServerResponse): void => {
    const call = client.makeBidiStreamRequest(route.method, passthrough, passthrough, metadataOf(req));
    streamOut(route, res, call);
    const splitter = new JsonSplitter();
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => {
      try {
        for (const value of splitter.push(chunk)) call.write(encodeJson(route.request, parseGatewayJson(value)));
      } catch (e) {
        log.debug('bad gateway stream message', { error: e instanceof Error ? e.message : String(e) });
        call.cancel();
      }
    });
    // As grpc-gateway: the request body ending half-closes the stream; responses continue.
    req.on('end', () => call.end());
  };

  const serverStream = async (route: Route, client: grpc.Client, req: http.IncomingMessage, res: http.ServerResponse): Promise<void> => {
    let payload: Buffer;
    try {
      const text = await readBody(req);
      payload = encodeJson(route.request, text.trim() === '' ? {} : parseGatewayJson(text));
    } catch (e) {
      writeGrpcError(res, { code: grpc.status.INVALID_ARGUMENT, details: e instanceof Error ? e.message : String(e) });
      return;
    }
    streamOut(route, res, client.makeServerStreamRequest(route.method, passthrough, passthrough, payload, metadataOf(req)));
  };

  return {
    handle(req, res): boolean {
      const url = new URL(req.url ?? '/', 'http://localhost');
      // etcd still maps the old /v3beta/ prefix.
      const p = url.pathname.startsWith('/v3beta/') ? '/v3/' + url.pathname.slice('/v3beta/'.length) : url.pathname;
      if (!p.startsWith('/v3/')) return false;
      const route = ROUTES[p];
      // grpc-gateway v1 answers these two in plain text, like Go's http.Error.
      if (!route) {
        writeText(res, 404, 'Not Found');
        return true;
      }
      if (req.method !== 'POST') {
        writeText(res, 405, 'Method Not Allowed');
        return true;
      }
      const target = localTargetOf(req.socket);
      if (!target) {
        writeJson(res, 503, { error: 'gateway has no local gRPC target', message: 'gateway has no local gRPC target', code: 14 });
        return true;
      }
      const client = clientFor(target);
      const fail = (e: unknown): void => {
        log.warn('gateway request failed', { path: p, error: e instanceof Error ? e.message : String(e) });
        if (!res.headersSent) writeGrpcError(res, e);
        else res.destroy();
      };
      if (route.kind === 'unary') unary(route, client, req, res).catch(fail);
      else if (route.kind === 'bidi') bidi(route, client, req, res);
      else serverStream(route, client, req, res).catch(fail);
      return true;
    },
    close(): void {
      for (const c of clients.values()) c.close();
      clients.clear();
    },
  };
}

function httpStatusText(code: number): string {
  const texts: Record<number, string> = {
    400: 'Bad Request', 401: 'Unauthorized', 403: 'Forbidden', 404: 'Not Found', 408: 'Request Timeout',
    409: 'Conflict', 429: 'Too Many Requests', 500: 'Internal Server Error', 501: 'Not Implemented',
    503: 'Service Unavailable', 504: 'Gateway Timeout',
  };
  return texts[code] ?? '';
}
