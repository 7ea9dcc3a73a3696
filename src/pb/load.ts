// Loads our copies of etcd's .proto files for grpc-js. The loader options fix the shape of
// every message object in the process (see docs/ARCHITECTURE.md, src/pb/types.ts); changing
// them changes every type in src/pb/types.ts.
import assert from 'node:assert';
import fs from 'node:fs';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import type * as protoLoader from '@grpc/proto-loader';
import * as protobuf from 'protobufjs';

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

let cachedRoot: protobuf.Root | undefined;
let cachedDefinition: protoLoader.PackageDefinition | undefined;
let cachedGrpcObject: grpc.GrpcObject | undefined;
const cachedServices = new Map<string, grpc.ServiceDefinition>();

/**
 * Every .proto file of PROTO_FILES parsed once, with the loader's field naming: the codecs of
 * src/pb/internal.ts and the services grpc-js serves (serviceDefinition) use its types.
 */
export function protoRoot(): protobuf.Root {
  if (cachedRoot === undefined) {
    const dir = protoDir();
    const r = new protobuf.Root();
    // Imports are written relative to proto/ (e.g. "mvccpb/kv.proto").
    r.resolvePath = (_origin: string, target: string) => path.join(dir, target);
    r.loadSync([...PROTO_FILES], { keepCase: LOADER_OPTIONS.keepCase });
    r.resolveAll();
    cachedRoot = r;
  }
  return cachedRoot;
}

/**
 * proto-loader's package definition of every file (message descriptors, services), loaded once.
 * The server does not use it: proto-loader parses the files again and describes every message
 * (~100 ms of a start). Tests hold serviceDefinition() to it.
 */
export function packageDefinition(): protoLoader.PackageDefinition {
  if (cachedDefinition === undefined) {
    // Loaded here, not at the top: only tests and tools reach this.
    const loader = require('@grpc/proto-loader') as typeof protoLoader;
    cachedDefinition = loader.loadSync([...PROTO_FILES], {
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

/** What toObject() is given to decode (proto-loader's deserializers pass it LOADER_OPTIONS). */
export const CONVERSION: protobuf.IConversionOptions = {
  longs: LOADER_OPTIONS.longs,
  enums: LOADER_OPTIONS.enums,
  defaults: LOADER_OPTIONS.defaults,
  oneofs: LOADER_OPTIONS.oneofs,
};

/** Words of an identifier as lodash's camelCase splits them ("HashKV": "Hash", "KV"). */
const WORD = /[A-Z]{2,}(?=[A-Z][a-z]+[0-9]*|[^A-Za-z0-9]|$)|[A-Z]?[a-z]+[0-9]*|[A-Z]|[0-9]+/g;

/** The alias proto-loader gives a method (lodash's camelCase): "HashKV" -> "hashKv", "LeaseGrant" -> "leaseGrant". */
function camelCase(name: string): string {
  const words = name.match(WORD) ?? [];
  return words.map((w, i) => (i === 0 ? w.toLowerCase() : w.charAt(0).toUpperCase() + w.slice(1).toLowerCase())).join('');
}

function serializer(type: protobuf.Type): (value: object) => Buffer {
  return (value) => {
    if (Array.isArray(value)) throw new Error(`Failed to serialize message: expected object with ${type.name} structure, got array instead`);
    const bytes = type.encode(type.fromObject(value as Record<string, unknown>)).finish();
    // grpc-js copies the result with Buffer methods; protobufjs hands back a Buffer in Node.
    return Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  };
}

function deserializer(type: protobuf.Type): (bytes: Buffer) => object {
  return (bytes) => type.toObject(type.decode(bytes), CONVERSION);
}

/**
 * A service definition by full name, e.g. `serviceDefinition('etcdserverpb.KV')`: each method's
 * path, streaming and codecs, as proto-loader would describe them (test/unit/pb/load.test.ts).
 */
export function serviceDefinition(fullName: string): grpc.ServiceDefinition {
  let def = cachedServices.get(fullName);
  if (def !== undefined) return def;
  const found = protoRoot().lookup(fullName);
  if (!(found instanceof protobuf.Service)) throw new Error(`not a service in the loaded protos: ${fullName}`);
  const methods: Record<string, grpc.MethodDefinition<object, object>> = {};
  for (const m of found.methodsArray) {
    const request = m.resolvedRequestType;
    const response = m.resolvedResponseType;
    assert(request && response, `${fullName}.${m.name}: message types not resolved`);
    methods[m.name] = {
      path: `/${fullName}/${m.name}`,
      requestStream: m.requestStream === true,
      responseStream: m.responseStream === true,
      requestSerialize: serializer(request),
      requestDeserialize: deserializer(request),
      responseSerialize: serializer(response),
      responseDeserialize: deserializer(response),
      originalName: camelCase(m.name),
    };
  }
  def = methods as grpc.ServiceDefinition;
  cachedServices.set(fullName, def);
  return def;
}

/** A client constructor by full service name, e.g. `clientConstructor('v3lockpb.Lock')`. */
export function clientConstructor(fullName: string): grpc.ServiceClientConstructor {
  return grpc.makeClientConstructor(serviceDefinition(fullName), fullName);
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
