// --client-crl-file as etcd applies it: after the handshake, each certificate the client presented
// is looked up by serial number in the CRL's revoked list, and a match closes the connection with
// "rejected connection". Nothing else of the CRL counts (etcd reads it with Go's x509.ParseCRL and
// checks neither its signature nor its dates), so a CRL past its nextUpdate still revokes and does
// not lock every client out, as it would if handed to OpenSSL. The file is read again when it
// changes, as etcd reads it on every connection.
import assert from 'node:assert';
import fs from 'node:fs';
import type { PeerCertificate } from 'node:tls';

/** Bound on a CRL file (a CRL of a million entries is ~40 MB). */
const MAX_CRL_BYTES = 64 * 1024 * 1024;

interface Tlv {
  tag: number;
  start: number;
  end: number;
}

function readTlv(b: Buffer, at: number, limit: number): Tlv {
  assert(at + 2 <= limit, 'CRL: truncated DER');
  const tag = b[at]!;
  let len = b[at + 1]!;
  let start = at + 2;
  if (len & 0x80) {
    const n = len & 0x7f;
    assert(n >= 1 && n <= 4 && start + n <= limit, 'CRL: bad DER length');
    len = 0;
    for (let i = 0; i < n; i++) len = len * 256 + b[start + i]!;
    start += n;
  }
  assert(start + len <= limit, 'CRL: DER value past its container');
  return { tag, start, end: start + len };
}

/** A serial as lower-case hex of its magnitude, without leading zeros ("0" for zero). */
function normalizeSerial(hex: string): string {
  const h = hex.toLowerCase().replace(/^0+/, '');
  return h === '' ? '0' : h;
}

/** The DER bytes of a CRL given as PEM or DER. */
function crlDer(data: Buffer): Buffer {
  const text = data.toString('latin1');
  const m = /-----BEGIN X509 CRL-----([\s\S]*?)-----END X509 CRL-----/.exec(text);
  return m ? Buffer.from(m[1]!.replace(/\s+/g, ''), 'base64') : data;
}

const SEQUENCE = 0x30;
const INTEGER = 0x02;
const UTC_TIME = 0x17;
const GENERALIZED_TIME = 0x18;

/** The serial numbers a CRL (PEM or DER, RFC 5280 CertificateList) revokes. Throws on malformed input. */
export function revokedSerials(data: Buffer): Set<string> {
  const b = crlDer(data);
  const list = readTlv(b, 0, b.length);
  assert(list.tag === SEQUENCE, 'CRL: not a CertificateList');
  const tbs = readTlv(b, list.start, list.end);
  assert(tbs.tag === SEQUENCE, 'CRL: no TBSCertList');
  let at = tbs.start;
  let f = readTlv(b, at, tbs.end);
  if (f.tag === INTEGER) f = readTlv(b, (at = f.end), tbs.end); // version
  assert(f.tag === SEQUENCE, 'CRL: no signature algorithm');
  f = readTlv(b, (at = f.end), tbs.end);
  assert(f.tag === SEQUENCE, 'CRL: no issuer');
  f = readTlv(b, (at = f.end), tbs.end);
  assert(f.tag === UTC_TIME || f.tag === GENERALIZED_TIME, 'CRL: no thisUpdate');
  at = f.end;
  const out = new Set<string>();
  if (at < tbs.end) {
    f = readTlv(b, at, tbs.end);
    if (f.tag === UTC_TIME || f.tag === GENERALIZED_TIME) at = f.end; // nextUpdate
  }
  if (at < tbs.end) {
    f = readTlv(b, at, tbs.end);
    if (f.tag === SEQUENCE) {
      for (let e = f.start; e < f.end; ) {
        const entry = readTlv(b, e, f.end);
        assert(entry.tag === SEQUENCE, 'CRL: bad revoked entry');
        const serial = readTlv(b, entry.start, entry.end);
        assert(serial.tag === INTEGER, 'CRL: revoked entry without a serial');
        out.add(normalizeSerial(b.subarray(serial.start, serial.end).toString('hex')));
        e = entry.end;
      }
    }
  }
  return out;
}

/** Reads a CRL file once per change. */
export class CrlFile {
  private serials: Set<string>;
  private mtimeMs: number;
  private size: number;

  /** Reads and parses the file now: a missing or malformed CRL fails start-up. */
  constructor(readonly file: string) {
    const st = fs.statSync(this.file);
    this.serials = this.load(st.size);
    this.mtimeMs = st.mtimeMs;
    this.size = st.size;
  }

  /** etcd's error text when one of `chain` is revoked; undefined otherwise. */
  rejection(chain: readonly Pick<PeerCertificate, 'serialNumber'>[]): string | undefined {
    this.refresh();
    for (const c of chain) {
      const serial = normalizeSerial(c.serialNumber ?? '');
      if (this.serials.has(serial)) return `transport: certificate serial ${serial.length % 2 === 0 ? serial : '0' + serial} revoked`;
    }
    return undefined;
  }

  private refresh(): void {
    let st: fs.Stats;
    try {
      st = fs.statSync(this.file);
    } catch {
      return; // Gone for now: keep what was read (etcd would reject every client; no better).
    }
    if (st.mtimeMs === this.mtimeMs && st.size === this.size) return;
    try {
      this.serials = this.load(st.size);
      this.mtimeMs = st.mtimeMs;
      this.size = st.size;
    } catch {
      // Being rewritten: the next connection reads it again.
    }
  }

  private load(size: number): Set<string> {
    assert(size <= MAX_CRL_BYTES, `CRL file ${this.file} is larger than ${MAX_CRL_BYTES} bytes`);
    return revokedSerials(fs.readFileSync(this.file));
  }
}

/** The client's certificate and the issuers it sent, as Node reports them. */
export function peerChain(leaf: PeerCertificate & { issuerCertificate?: PeerCertificate }): PeerCertificate[] {
  const chain: PeerCertificate[] = [];
  const seen = new Set<string>();
  for (let c: (PeerCertificate & { issuerCertificate?: PeerCertificate }) | undefined = leaf; c && c.serialNumber; c = c.issuerCertificate) {
    const id = c.fingerprint256 ?? c.serialNumber;
    if (seen.has(id) || chain.length >= 16) break; // a self-signed root points at itself
    seen.add(id);
    chain.push(c);
  }
  return chain;
}
