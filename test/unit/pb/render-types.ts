// Renders src/pb/types.ts from the .proto files, so the TypeScript shapes cannot drift from
// what @grpc/proto-loader produces. types.test.ts checks the committed file equals this
// output; `UPDATE_PB_TYPES=1 npx vitest run test/unit/pb/types.test.ts` rewrites it.
import path from 'node:path';
import protobuf from 'protobufjs';
import { PROTO_FILES, protoDir } from '../../../src/pb/load';

const PACKAGE_ORDER = [
  'mvccpb',
  'authpb',
  'etcdserverpb',
  'membershippb',
  'v3lockpb',
  'v3electionpb',
  'grpc.health.v1',
  'raftpb',
];

/** Short TS names where two packages share a message name. */
const RENAMES: Record<string, string> = {
  'membershippb.Member': 'MembershipMember',
};

const SCALAR_TS: Record<string, string> = {
  double: 'number',
  float: 'number',
  int32: 'number',
  uint32: 'number',
  sint32: 'number',
  fixed32: 'number',
  sfixed32: 'number',
  int64: 'string',
  uint64: 'string',
  sint64: 'string',
  fixed64: 'string',
  sfixed64: 'string',
  bool: 'boolean',
  string: 'string',
  bytes: 'Buffer',
};

export function loadRoot(): protobuf.Root {
  const root = new protobuf.Root();
  const dir = protoDir();
  root.resolvePath = (_origin: string, target: string) => path.join(dir, target);
  root.loadSync([...PROTO_FILES], { keepCase: false });
  root.resolveAll();
  return root;
}

function tsName(full: string): string {
  const renamed = RENAMES[full];
  if (renamed !== undefined) return renamed;
  return full.split('.').pop() as string;
}

/** Enum const name: nested enums get the parent message as prefix, as in etcd's Go code. */
function enumConstName(e: protobuf.Enum): string {
  return e.parent instanceof protobuf.Type ? `${e.parent.name}_${e.name}` : e.name;
}

function fullName(r: protobuf.ReflectionObject): string {
  return r.fullName.replace(/^\./, '');
}

function collect(ns: protobuf.NamespaceBase, types: protobuf.Type[], enums: protobuf.Enum[]): void {
  for (const nested of ns.nestedArray) {
    if (nested instanceof protobuf.Type) {
      types.push(nested);
      collect(nested, types, enums);
    } else if (nested instanceof protobuf.Enum) {
      enums.push(nested);
    } else if (nested instanceof protobuf.Namespace && !(nested instanceof protobuf.Service)) {
      collect(nested, types, enums);
    }
  }
}

function packageOf(r: protobuf.ReflectionObject): string {
  let p: protobuf.ReflectionObject | null = r.parent;
  while (p instanceof protobuf.Type) p = p.parent;
  return p === null ? '' : fullName(p);
}

function fieldType(f: protobuf.Field): string {
  const resolved = f.resolvedType;
  let base: string;
  if (resolved instanceof protobuf.Type) base = tsName(fullName(resolved));
  else if (resolved instanceof protobuf.Enum) base = 'number';
  else {
    const scalar = SCALAR_TS[f.type];
    if (scalar === undefined) throw new Error(`unmapped type ${f.type}`);
    base = scalar;
  }
  if (f.repeated) return `${base}[]`;
  if (resolved instanceof protobuf.Type && !f.partOf) return `${base} | null`;
  return base;
}

const HEADER = `// GENERATED from proto/ by test/unit/pb/render-types.ts; edit that file, not this one.
//
// Plain-object shapes of every wire message, exactly as @grpc/proto-loader decodes them
// with { keepCase: false, longs: String, enums: Number, defaults: true, oneofs: true }:
// - field names camelCased only where the proto name has "_" + lowercase letter
//   (\`range_end\` -> \`rangeEnd\`; \`ID\`, \`TTL\`, \`remaining_TTL\`, \`member_ID\` stay as written);
// - int64/uint64 are decimal strings (lease IDs use all 64 bits: never go through Number);
// - bytes are Buffer, enums numbers (see the const objects below), repeated fields arrays;
// - an unset sub-message is null;
// - a oneof member is present only when set, and the oneof's own name (e.g. \`request\` on
//   RequestOp) holds the name of the member that is set.
//
// Building messages to send: grpc-js serializes through protobufjs fromObject, which
// treats a missing field as its default and ignores the oneof discriminator, and accepts
// int64 as decimal string or number. Use \`MessageInit<T>\` for partially filled objects.
`;

export function renderTypes(): string {
  const root = loadRoot();
  const types: protobuf.Type[] = [];
  const enums: protobuf.Enum[] = [];
  collect(root, types, enums);
  const byPackage = (a: protobuf.ReflectionObject, b: protobuf.ReflectionObject): number =>
    PACKAGE_ORDER.indexOf(packageOf(a)) - PACKAGE_ORDER.indexOf(packageOf(b));
  for (const t of types) {
    if (!PACKAGE_ORDER.includes(packageOf(t))) throw new Error(`unordered package ${packageOf(t)}`);
  }
  types.sort(byPackage);
  enums.sort(byPackage);

  const out: string[] = [HEADER];
  out.push('/** A message object as built for sending: every field optional, recursively. */');
  out.push('export type MessageInit<T> = T extends Buffer');
  out.push('  ? Buffer');
  out.push('  : T extends (infer E)[]');
  out.push('    ? MessageInit<E>[]');
  out.push('    : T extends object');
  out.push('      ? { [K in keyof T]?: MessageInit<T[K]> | null }');
  out.push('      : T;');
  out.push('');
  out.push('// ---- enums (values are the wire numbers) ----');
  out.push('');
  for (const e of enums) {
    const name = enumConstName(e);
    out.push(`/** ${fullName(e)} */`);
    out.push(`export const ${name} = {`);
    for (const [k, v] of Object.entries(e.values)) out.push(`  ${k}: ${v},`);
    out.push('} as const;');
    out.push(`export type ${name}Value = (typeof ${name})[keyof typeof ${name}];`);
    out.push('');
  }
  let currentPackage = '';
  for (const t of types) {
    const pkg = packageOf(t);
    if (pkg !== currentPackage) {
      out.push(`// ---- ${pkg} ----`);
      out.push('');
      currentPackage = pkg;
    }
    out.push(`/** ${fullName(t)} */`);
    const fields = t.fieldsArray;
    const oneofs = t.oneofsArray;
    if (fields.length === 0) {
      out.push(`export type ${tsName(fullName(t))} = Record<string, never>;`);
      out.push('');
      continue;
    }
    out.push(`export interface ${tsName(fullName(t))} {`);
    for (const f of fields) {
      const optional = f.partOf !== null ? '?' : '';
      out.push(`  ${f.name}${optional}: ${fieldType(f)};`);
    }
    for (const o of oneofs) {
      const members = o.oneof.map((m) => `'${m}'`).join(' | ');
      out.push(`  /** Which member of oneof \`${o.name}\` is set; absent when none is. */`);
      out.push(`  ${o.name}?: ${members};`);
    }
    out.push('}');
    out.push('');
  }
  out.push('/** Full proto name to TypeScript shape, for typed access by name. */');
  out.push('export interface MessageByName {');
  for (const t of types) out.push(`  '${fullName(t)}': ${tsName(fullName(t))};`);
  out.push('}');
  out.push('export type MessageName = keyof MessageByName;');
  return out.join('\n') + '\n';
}
