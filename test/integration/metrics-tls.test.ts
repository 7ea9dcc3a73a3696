// An https:// --listen-metrics-urls serves with the client TLS settings, as etcd's does: client
// certificates required with --client-cert-auth, and --client-crl-file applied after the handshake.
import fs from 'node:fs';
import https from 'node:https';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { certSerial, generateKubeadmPki, makeCrl, type CertPair, type KubeadmPki } from '../helpers/certs';
import { EtcdMember, startEtcd } from '../helpers/etcd-process';
import { freePort } from '../helpers/ports';
import { waitFor } from '../helpers/wait';

let pki: KubeadmPki;
let m: EtcdMember;
let metricsUrl: string;

beforeAll(async () => {
  pki = generateKubeadmPki([{ name: 'node-a', ips: ['127.0.0.1'] }]);
  const server = pki.server.get('node-a')!;
  const crl = makeCrl(pki.dir, pki.ca, [pki.healthcheckClient], { expired: true });
  metricsUrl = `https://127.0.0.1:${await freePort()}`;
  m = await startEtcd({
    args: [
      `--listen-metrics-urls=${metricsUrl}`,
      `--cert-file=${server.cert}`,
      `--key-file=${server.key}`,
      `--trusted-ca-file=${pki.ca.cert}`,
      '--client-cert-auth',
      `--client-crl-file=${crl.der}`,
    ],
  });
});
afterAll(async () => {
  await m?.stop();
  if (pki) fs.rmSync(pki.dir, { recursive: true, force: true });
});

function health(client: CertPair): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = https.get(`${metricsUrl}/health`, {
      ca: fs.readFileSync(pki.ca.cert),
      cert: fs.readFileSync(client.cert),
      key: fs.readFileSync(client.key),
      timeout: 10_000,
    });
    req.on('response', (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (body += d));
      res.on('end', () => resolve(body));
    });
    req.on('timeout', () => req.destroy(new Error('timed out')));
    req.on('error', reject);
  });
}

describe('https metrics URL', () => {
  it('answers a trusted client and refuses one whose certificate the CRL revokes', async () => {
    expect(JSON.parse(await health(pki.apiserverEtcdClient))).toMatchObject({ health: 'true' });
    await expect(health(pki.healthcheckClient)).rejects.toThrow();
    const serial = certSerial(pki.healthcheckClient).toLowerCase().replace(/^0+/, '');
    await waitFor('the rejection in the log', () => m.logs().includes(`transport: certificate serial ${serial.length % 2 ? '0' + serial : serial} revoked`));
  });
});
