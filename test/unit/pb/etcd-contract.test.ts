// Our .proto files against etcd's own (3.4.23, installed under /usr/share/gocode): every
// message, field (name, number, type, repeated), enum value and RPC etcd has must be here,
// and anything extra must be a known 3.5/3.6 addition.
import fs from 'node:fs';
import path from 'node:path';
import protobuf from 'protobufjs';
import { describe, expect, it } from 'vitest';
import { PROTO_FILES, protoDir } from '../../../src/pb/load';

const ETCD_SRC = '/usr/share/gocode/src/go.etcd.io/etcd';
const ETCD_PROTOS = [
  'etcdserver/etcdserverpb/rpc.proto',
  'etcdserver/etcdserverpb/raft_internal.proto',
  'mvcc/mvccpb/kv.proto',
  'auth/authpb/auth.proto',
  'etcdserver/api/v3lock/v3lockpb/v3lock.proto',
  'etcdserver/api/v3election/v3electionpb/v3election.proto',
  'raft/raftpb/raft.proto',
];

/** What etcd 3.5/3.6 added on top of 3.4 (checked against etcd-io/etcd main's api/*.proto). */
const ADDED_AFTER_34: Record<string, string[]> = {
  'etcdserverpb.HashKVResponse': ['hash_revision'],
  'etcdserverpb.SnapshotResponse': ['version'],
  'etcdserverpb.MemberListRequest': ['linearizable'],
  'etcdserverpb.StatusResponse': ['storageVersion', 'dbSizeQuota', 'downgradeInfo'],
  'etcdserverpb.AuthUserAddRequest': ['hashedPassword'],
  'etcdserverpb.AuthUserChangePasswordRequest': ['hashedPassword'],
  'etcdserverpb.InternalRaftRequest': ['auth_status', 'cluster_version_set', 'cluster_member_attr_set', 'downgrade_info_set'],
};
const NEW_MESSAGES_AFTER_34 = new Set([
  'etcdserverpb.DowngradeRequest',
  'etcdserverpb.DowngradeResponse',
  'etcdserverpb.DowngradeVersionTestRequest',
  'etcdserverpb.DowngradeInfo',
  'etcdserverpb.AuthStatusRequest',
  'etcdserverpb.AuthStatusResponse',
]);
const NEW_METHODS_AFTER_34: Record<string, string[]> = {
  'etcdserverpb.Maintenance': ['Downgrade'],
  'etcdserverpb.Auth': ['AuthStatus'],
};
/** etcd's v2 request (field 2 of InternalRaftRequest) is deliberately not carried. */
const OMITTED_FIELDS: Record<string, string[]> = { 'etcdserverpb.InternalRaftRequest': ['v2'] };

function ours(): protobuf.Root {
  const root = new protobuf.Root();
  const dir = protoDir();
  root.resolvePath = (_o: string, t: string) => path.join(dir, t);
  root.loadSync([...PROTO_FILES], { keepCase: true });
  root.resolveAll();
  return root;
}

function etcdRoot(): protobuf.Root {
  const root = new protobuf.Root();
  for (const f of ETCD_PROTOS) {
    protobuf.parse(fs.readFileSync(path.join(ETCD_SRC, f), 'utf8'), root, { keepCase: true });
  }
  return root;
}

function walk(ns: protobuf.NamespaceBase, visit: (r: protobuf.ReflectionObject) => void): void {
  for (const n of ns.nestedArray) {
    visit(n);
    if (n instanceof protobuf.Namespace) walk(n, visit);
  }
}

const lastSegment = (typeName: string): string => typeName.split('.').pop() as string;
const full = (r: protobuf.ReflectionObject): string => r.fullName.replace(/^\./, '');

const haveEtcd = fs.existsSync(ETCD_SRC);

describe.runIf(haveEtcd)('proto/ against etcd 3.4 sources', () => {
  const mine = ours();
  const etcd = etcdRoot();
  const etcdTypes: protobuf.Type[] = [];
  const etcdEnums: protobuf.Enum[] = [];
  const etcdServices: protobuf.Service[] = [];
  walk(etcd, (r) => {
    if (r instanceof protobuf.Type) etcdTypes.push(r);
    else if (r instanceof protobuf.Enum) etcdEnums.push(r);
    else if (r instanceof protobuf.Service) etcdServices.push(r);
  });
  // etcdserver.proto (v2 Request, Metadata) is not imported by us.
  const skipped = new Set(['etcdserverpb.Request', 'etcdserverpb.Metadata']);

  it('has every etcd message with identical fields', () => {
    expect(etcdTypes.length).toBeGreaterThan(100);
    for (const et of etcdTypes) {
      const name = full(et);
      if (skipped.has(name)) continue;
      const mt = mine.lookupType(name);
      const omitted = OMITTED_FIELDS[name] ?? [];
      for (const ef of et.fieldsArray) {
        if (omitted.includes(ef.name)) continue;
        const mf = mt.fields[ef.name];
        expect(mf, `${name}.${ef.name}`).toBeDefined();
        expect([name, ef.name, mf.id, lastSegment(mf.type), mf.repeated, mf.partOf?.name ?? null]).toEqual([
          name,
          ef.name,
          ef.id,
          lastSegment(ef.type),
          ef.repeated,
          ef.partOf?.name ?? null,
        ]);
      }
      const extra = mt.fieldsArray.map((f) => f.name).filter((n) => et.fields[n] === undefined);
      expect(extra, `extra fields of ${name}`).toEqual(ADDED_AFTER_34[name] ?? []);
    }
  });

  it('adds only the known 3.5/3.6 messages in etcd packages', () => {
    const etcdNames = new Set(etcdTypes.map(full));
    const extra: string[] = [];
    walk(mine, (r) => {
      if (!(r instanceof protobuf.Type)) return;
      const name = full(r);
      const pkg = name.split('.')[0];
      if (['membershippb', 'grpc'].includes(pkg)) return;
      if (!etcdNames.has(name)) extra.push(name);
    });
    expect(extra.sort()).toEqual([...NEW_MESSAGES_AFTER_34].sort());
  });

  it('has every etcd enum with identical values', () => {
    for (const ee of etcdEnums) {
      expect(mine.lookupEnum(full(ee)).values, full(ee)).toEqual(ee.values);
    }
  });

  it('has every etcd service and method with identical signatures', () => {
    for (const es of etcdServices) {
      const ms = mine.lookupService(full(es));
      for (const em of es.methodsArray) {
        const mm = ms.methods[em.name];
        expect(mm, `${full(es)}.${em.name}`).toBeDefined();
        expect([lastSegment(mm.requestType), !!mm.requestStream, lastSegment(mm.responseType), !!mm.responseStream]).toEqual([
          lastSegment(em.requestType),
          !!em.requestStream,
          lastSegment(em.responseType),
          !!em.responseStream,
        ]);
      }
      const extra = ms.methodsArray.map((m) => m.name).filter((n) => es.methods[n] === undefined);
      expect(extra, full(es)).toEqual(NEW_METHODS_AFTER_34[full(es)] ?? []);
    }
  });
});
