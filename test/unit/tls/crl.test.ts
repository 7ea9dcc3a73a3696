// --client-crl-file's contents as etcd reads them: the revoked serial numbers, from PEM or DER,
// whatever the CRL's dates.
import fs from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CrlFile, revokedSerials } from '../../../src/tls/crl';
import { certSerial, generateKubeadmPki, makeCrl, type KubeadmPki } from '../../helpers/certs';

let pki: KubeadmPki;
beforeAll(() => {
  pki = generateKubeadmPki([{ name: 'node-a', ips: ['127.0.0.1'] }]);
});
afterAll(() => {
  fs.rmSync(pki.dir, { recursive: true, force: true });
});

const norm = (hex: string): string => hex.toLowerCase().replace(/^0+/, '');

describe('CRL revoked serials', () => {
  it('reads the revoked serials from PEM and DER alike, expired or not', () => {
    const revoked = [pki.healthcheckClient, pki.apiserverEtcdClient];
    const want = new Set(revoked.map((c) => norm(certSerial(c))));
    for (const expired of [false, true]) {
      const crl = makeCrl(pki.dir, pki.ca, revoked, { expired });
      expect(revokedSerials(fs.readFileSync(crl.pem))).toEqual(want);
      expect(revokedSerials(fs.readFileSync(crl.der))).toEqual(want);
    }
    expect(revokedSerials(fs.readFileSync(makeCrl(pki.dir, pki.ca, []).der))).toEqual(new Set());
  });

  it('refuses what is not a CRL', () => {
    expect(() => revokedSerials(Buffer.from('not a crl'))).toThrow(/CRL/);
    expect(() => revokedSerials(fs.readFileSync(pki.ca.cert))).toThrow(/CRL/);
  });

  it('names the revoked certificate as etcd does, and rereads the file when it changes', () => {
    const crl = makeCrl(pki.dir, pki.ca, [pki.healthcheckClient]);
    const file = `${crl.der}.live`;
    fs.copyFileSync(crl.der, file);
    const f = new CrlFile(file);
    const hc = { serialNumber: certSerial(pki.healthcheckClient) };
    const api = { serialNumber: certSerial(pki.apiserverEtcdClient) };
    const hex = norm(hc.serialNumber);
    expect(f.rejection([hc])).toBe(`transport: certificate serial ${hex.length % 2 ? '0' + hex : hex} revoked`);
    expect(f.rejection([api])).toBeUndefined();
    // The operator publishes a new CRL: the next connection sees it.
    fs.copyFileSync(makeCrl(pki.dir, pki.ca, [pki.apiserverEtcdClient]).der, file);
    const later = new Date(Date.now() + 5000);
    fs.utimesSync(file, later, later);
    expect(f.rejection([hc])).toBeUndefined();
    expect(f.rejection([api])).toMatch(/^transport: certificate serial [0-9a-f]+ revoked$/);
  });
});
