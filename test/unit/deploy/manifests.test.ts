// What can be checked of deploy/ without a Kubernetes cluster: the manifests parse, are
// well-formed Kubernetes/kind objects that refer to each other consistently, and the etcd command
// lines in them are accepted by our flag parser.
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../../src/config';
import { parseYaml, parseYamlDocuments, type Yaml } from './yaml-lite';

const ROOT = path.resolve(__dirname, '..', '..', '..');
const DEPLOY = path.join(ROOT, 'deploy');

type Obj = { [k: string]: Yaml };
const obj = (v: Yaml | undefined, what: string): Obj => {
  expect(v, what).toBeTypeOf('object');
  expect(Array.isArray(v), what).toBe(false);
  expect(v, what).not.toBeNull();
  return v as Obj;
};
const arr = (v: Yaml | undefined, what: string): Yaml[] => {
  expect(Array.isArray(v), what).toBe(true);
  return v as Yaml[];
};
const str = (v: Yaml | undefined, what: string): string => {
  expect(typeof v, what).toBe('string');
  return v as string;
};

/** Kubernetes object names: DNS-1123 labels/subdomains. */
const DNS1123 = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

function checkObjectShape(o: Obj): void {
  const apiVersion = str(o['apiVersion'], 'apiVersion');
  const kind = str(o['kind'], 'kind');
  expect(/^([a-z0-9.-]+\/)?v[0-9]+((alpha|beta)[0-9]+)?$/.test(apiVersion), apiVersion).toBe(true);
  expect(/^[A-Z][A-Za-z]+$/.test(kind), kind).toBe(true);
  const md = obj(o['metadata'], `${kind}.metadata`);
  const name = str(md['name'], `${kind}.metadata.name`);
  expect(DNS1123.test(name) && name.length <= 63, name).toBe(true);
}

function matches(selector: Obj, labels: Obj): boolean {
  return Object.entries(selector).every(([k, v]) => labels[k] === v);
}

describe('yaml-lite', () => {
  it('parses the YAML shapes the manifests use and rejects what it does not understand', () => {
    expect(parseYaml('a: 1\nb:\n  - x\n  - k: v\n    n: [1, "two"]\nc: |\n  line1\n  line2\nd: "q#"  # c\n')).toEqual({
      a: 1,
      b: ['x', { k: 'v', n: [1, 'two'] }],
      c: 'line1\nline2\n',
      d: 'q#',
    });
    expect(parseYamlDocuments('a: 1\n---\nb: 2\n')).toEqual([{ a: 1 }, { b: 2 }]);
    expect(() => parseYaml('a: 1\na: 2\n')).toThrow(/duplicate key/);
    expect(() => parseYaml('a: &anchor 1\n')).toThrow(/unsupported/);
  });
});

describe('deploy/k8s/etcd.yaml', () => {
  const docs = parseYamlDocuments(fs.readFileSync(path.join(DEPLOY, 'k8s', 'etcd.yaml'), 'utf8')).map((d, i) => obj(d, `document ${i}`));
  const byKind = (k: string): Obj[] => docs.filter((d) => d['kind'] === k);

  it('holds valid-looking Kubernetes objects: two Services, a PodDisruptionBudget, a StatefulSet', () => {
    for (const d of docs) checkObjectShape(d);
    expect(docs.map((d) => d['kind']).sort()).toEqual(['PodDisruptionBudget', 'Service', 'Service', 'StatefulSet']);
    expect(byKind('StatefulSet')[0]!['apiVersion']).toBe('apps/v1');
    expect(byKind('PodDisruptionBudget')[0]!['apiVersion']).toBe('policy/v1');
  });

  it('gives a 3-member StatefulSet stable peer names through a headless Service that publishes unready pods', () => {
    const sts = byKind('StatefulSet')[0]!;
    const spec = obj(sts['spec'], 'sts.spec');
    expect(spec['replicas']).toBe(3);
    expect(spec['podManagementPolicy']).toBe('Parallel');
    const svcName = str(spec['serviceName'], 'serviceName');
    const headless = byKind('Service').find((s) => obj(s['metadata'], 'md')['name'] === svcName);
    expect(headless, `Service ${svcName}`).toBeDefined();
    const hs = obj(headless!['spec'], 'svc.spec');
    expect(hs['clusterIP']).toBe('None');
    expect(hs['publishNotReadyAddresses']).toBe(true);

    const podLabels = obj(obj(obj(spec['template'], 'template')['metadata'], 'template.metadata')['labels'], 'labels');
    expect(matches(obj(obj(spec['selector'], 'selector')['matchLabels'], 'matchLabels'), podLabels)).toBe(true);
    for (const s of byKind('Service')) expect(matches(obj(obj(s['spec'], 'spec')['selector'], 'selector'), podLabels)).toBe(true);
    const pdb = obj(byKind('PodDisruptionBudget')[0]!['spec'], 'pdb.spec');
    expect(matches(obj(obj(pdb['selector'], 'selector')['matchLabels'], 'matchLabels'), podLabels)).toBe(true);
    // Quorum of 3 survives one voluntary disruption, not two.
    expect(pdb['maxUnavailable'] === 1 || pdb['minAvailable'] === 2).toBe(true);
  });

  it('probes the metrics port, mounts a persistent volume at the data dir, and passes flags our etcd accepts', () => {
    const sts = byKind('StatefulSet')[0]!;
    const stsName = str(obj(sts['metadata'], 'md')['name'], 'name');
    const spec = obj(sts['spec'], 'sts.spec');
    const pod = obj(obj(spec['template'], 'template')['spec'], 'pod spec');
    const [container] = arr(pod['containers'], 'containers').map((c) => obj(c, 'container'));
    const ports = arr(container!['ports'], 'ports').map((p) => obj(p, 'port'));
    const portByName = new Map(ports.map((p) => [p['name'], p['containerPort']]));
    expect(portByName.get('metrics')).toBe(2381);
    const probes = { startupProbe: '/readyz', livenessProbe: '/livez', readinessProbe: '/readyz' };
    for (const [probe, p] of Object.entries(probes)) {
      const g = obj(obj(container![probe], probe)['httpGet'], `${probe}.httpGet`);
      expect(g['path']).toBe(p);
      expect(g['port']).toBe('metrics');
    }
    const claims = arr(spec['volumeClaimTemplates'], 'volumeClaimTemplates').map((v) => obj(v, 'pvc'));
    const mounts = arr(container!['volumeMounts'], 'volumeMounts').map((v) => obj(v, 'mount'));
    const dataMount = mounts.find((m) => m['mountPath'] === '/var/lib/etcd');
    expect(dataMount).toBeDefined();
    expect(claims.map((c) => obj(c['metadata'], 'md')['name'])).toContain(dataMount!['name']);

    // Kubernetes expands $(VAR) from the container's env; every reference must be defined.
    const env = new Map(arr(container!['env'], 'env').map((e) => [str(obj(e, 'env')['name'], 'env name'), e]));
    const args = arr(container!['args'], 'args').map((a) => str(a, 'arg'));
    expect(arr(container!['command'], 'command')).toEqual(['etcd']);
    for (const a of args) for (const m of a.matchAll(/\$\(([A-Z_]+)\)/g)) expect(env.has(m[1]!), m[1]).toBe(true);
    for (let ordinal = 0; ordinal < 3; ordinal++) {
      const podName = `${stsName}-${ordinal}`;
      const argv = args.map((a) => a.replace(/\$\(POD_NAME\)/g, podName).replace(/\$\(POD_NAMESPACE\)/g, 'default'));
      const parsed = parseConfig(argv, {});
      expect(parsed.kind, JSON.stringify(parsed.kind === 'error' ? parsed.message : '')).toBe('run');
      if (parsed.kind !== 'run') continue;
      const members = [...parsed.config.initialCluster.keys()].sort();
      expect(members).toEqual(['etcd-0', 'etcd-1', 'etcd-2'].map((n) => n.replace('etcd', stsName)));
      expect(parsed.config.name).toBe(podName);
      expect(parsed.config.initialCluster.get(podName)!.map((u) => u.text)).toEqual(parsed.config.initialAdvertisePeerUrls.map((u) => u.text));
      expect(parsed.config.listenMetricsUrls.map((u) => u.port)).toEqual(['2381']);
    }
  });
});

describe('deploy/kind', () => {
  const load = (f: string): Obj => obj(parseYaml(fs.readFileSync(path.join(DEPLOY, 'kind', f), 'utf8')), f);
  const patch = (cfg: Obj): Obj => {
    const patches = arr(cfg['kubeadmConfigPatches'], 'kubeadmConfigPatches').map((p) => obj(parseYaml(str(p, 'patch')), 'patch'));
    const cc = patches.find((p) => p['kind'] === 'ClusterConfiguration');
    expect(cc).toBeDefined();
    return obj(cc!['etcd'], 'etcd');
  };

  for (const f of ['kind-etcd-ts.yaml', 'kind-etcd-ts-ha.yaml']) {
    it(`${f}: points kubeadm's local etcd at our image, pullable from the local registry`, () => {
      const cfg = load(f);
      expect(cfg['kind']).toBe('Cluster');
      expect(cfg['apiVersion']).toBe('kind.x-k8s.io/v1alpha4');
      const local = obj(patch(cfg)['local'], 'etcd.local');
      const image = `${str(local['imageRepository'], 'imageRepository')}/etcd:${str(local['imageTag'], 'imageTag')}`;
      // kubeadm chooses etcd's flag style from the tag: it must read as etcd 3.6.
      expect(str(local['imageTag'], 'tag')).toMatch(/^v?3\.6\.\d+/);
      const sts = parseYamlDocuments(fs.readFileSync(path.join(DEPLOY, 'k8s', 'etcd.yaml'), 'utf8')).map((d) => obj(d, 'doc')).find((d) => d['kind'] === 'StatefulSet')!;
      const container = obj(arr(obj(obj(obj(sts['spec'], 's')['template'], 't')['spec'], 'p')['containers'], 'c')[0], 'c0');
      expect(container['image']).toBe(image);
      const nodes = arr(cfg['nodes'], 'nodes').map((n) => obj(n, 'node'));
      expect(nodes.filter((n) => n['role'] === 'control-plane').length).toBe(f.includes('-ha') ? 3 : 1);
      const registry = str(local['imageRepository'], 'repo');
      for (const n of nodes) {
        const mounts = arr(n['extraMounts'], 'extraMounts').map((m) => obj(m, 'mount'));
        const certsd = mounts.find((m) => m['containerPath'] === '/etc/containerd/certs.d');
        expect(certsd).toBeDefined();
        const hostDir = path.join(ROOT, str(certsd!['hostPath'], 'hostPath'));
        expect(fs.existsSync(path.join(hostDir, registry, 'hosts.toml'))).toBe(true);
      }
    });
  }

  it('kind-external-etcd.yaml: points kubeadm at external https endpoints with the apiserver client certificate', () => {
    const cfg = load('kind-external-etcd.yaml');
    const ext = obj(patch(cfg)['external'], 'etcd.external');
    for (const e of arr(ext['endpoints'], 'endpoints')) expect(str(e, 'endpoint')).toMatch(/^https:\/\/[^/]+:\d+$/);
    const mount = obj(arr(obj(arr(cfg['nodes'], 'nodes')[0], 'node')['extraMounts'], 'mounts')[0], 'mount');
    for (const k of ['caFile', 'certFile', 'keyFile']) expect(str(ext[k], k).startsWith(`${str(mount['containerPath'], 'containerPath')}/`)).toBe(true);
  });
});
