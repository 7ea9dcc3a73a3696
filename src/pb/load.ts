// Loads our copies of etcd's .proto files for grpc-js. The loader options fix the shape of
// every message object in the process (see docs/ARCHITECTURE.md, src/pb/types.ts); changing
// them changes every type in src/pb/types.ts.
import fs from 'node:fs';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';

/** Every .proto file we serve or use, relative to the proto/ directory. */
export const PROTO_FILES: readonly string[] = [
  'etcdserverpb/rpc.proto',
  'etcdserverpb/raft_internal.proto',
  'mvccpb/kv.proto',
  'authpb/auth.proto',
  'membershippb/membership.proto',
  'v3lockpb/v3lock.proto',
  'v3electionpb/v3election.proto',
  'grpc/health/v1/health.proto',
  'raftpb/raft.proto',
];

/** The one set of conversion options; src/pb/internal.ts decodes with the same ones. */
export const LOADER_OPTIONS = {
  keepCase: false,
  longs: String,
  enums: Number,
  defaults: true,
  oneofs: true,
} as const;

const MAX_PARENT_HOPS = 6;

/**
 * The proto/ directory beside package.json. Walking up (instead of a fixed `../..`) lets
 * the same code run from src/pb (vitest, ts sources) and from dist/src/pb (compiled).
 */
export function protoDir(): string {
  let dir = __dirname;
  for (let hop = 0; hop < MAX_PARENT_HOPS; hop++) {
    const candidate = path.join(dir, 'proto');
    if (fs.existsSync(path.join(candidate, 'etcdserverpb', 'rpc.proto'))) return candidate;
    const parent = path.dirname(dir);
    if (parent === dir) break;
    dir = parent;
  }
  throw new Error(`proto/ directory not found above ${__dirname}`);
}

let cachedDefinition: protoLoader.PackageDefinition | undefined;
let cachedGrpcObject: grpc.GrpcObject | undefined;

/** proto-loader's package definition (message types and method serializers), loaded once. */
export function packageDefinition(): protoLoader.PackageDefinition {
  if (cachedDefinition === undefined) {
    cachedDefinition = protoLoader.loadSync([...PROTO_FILES], {
      ...LOADER_OPTIONS,
      includeDirs: [protoDir()],
    });
  }
  return cachedDefinition;
}

/** grpc-js view of every package: `grpcObject().etcdserverpb.KV.service`, etc. */
export function grpcObject(): grpc.GrpcObject {
  if (cachedGrpcObject === undefined) {
    cachedGrpcObject = grpc.loadPackageDefinition(packageDefinition());
  }
  return cachedGrpcObject;
}

/** A service definition by full name, e.g. `serviceDefinition('etcdserverpb.KV')`. */
export function serviceDefinition(fullName: string): grpc.ServiceDefinition {
  const def = packageDefinition()[fullName];
  if (def === undefined || isMessageOrEnum(def)) {
    throw new Error(`not a service in the loaded protos: ${fullName}`);
  }
  return def as grpc.ServiceDefinition;
}

/** A client constructor by full service name, e.g. `clientConstructor('v3lockpb.Lock')`. */
export function clientConstructor(fullName: string): grpc.ServiceClientConstructor {
  return grpc.makeClientConstructor(serviceDefinition(fullName), fullName);
}

function isMessageOrEnum(
  def: protoLoader.AnyDefinition,
): def is protoLoader.MessageTypeDefinition<object, object> | protoLoader.EnumTypeDefinition {
  return 'format' in def;
}

/** Full names of the services we load; the API registers some of them. */
export const SERVICE_NAMES = [
  'etcdserverpb.KV',
  'etcdserverpb.Watch',
  'etcdserverpb.Lease',
  'etcdserverpb.Cluster',
  'etcdserverpb.Maintenance',
  'etcdserverpb.Auth',
  'v3lockpb.Lock',
  'v3electionpb.Election',
  'grpc.health.v1.Health',
] as const;
export type ServiceName = (typeof SERVICE_NAMES)[number];
