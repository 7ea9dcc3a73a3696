// Resolves the member's client and peer TLS from the configuration at start-up: --auto-tls
// certificates, file loading and etcd's start-up log lines.
import path from 'node:path';
import type { Config, TlsFiles } from '../config/types';
import { describeTls, loadTlsMaterial, tlsFilesEmpty, type TlsMaterial } from './material';
import { selfCert, type SelfCertLogger } from './selfcert';

export interface MemberTls {
  /** For https:// and unixs:// client URLs and https:// metrics URLs; undefined = no TLS configured. */
  client: TlsMaterial | undefined;
  /** For https:// peer URLs (listening and dialling). */
  peer: TlsMaterial | undefined;
}

type TlsConfig = Pick<
  Config,
  'dataDir' | 'clientTls' | 'peerTls' | 'listenClientUrls' | 'listenPeerUrls' | 'selfSignedCertValidityYears' | 'tlsMinVersion' | 'tlsMaxVersion' | 'cipherSuites'
>;

/** The flags the TLS layer acts on; main removes them from the "accepted but not acted on" list. */
export const TLS_FLAGS = new Set<string>([
  'cert-file',
  'key-file',
  'trusted-ca-file',
  'client-cert-auth',
  'client-crl-file',
  'client-cert-allowed-hostname',
  'auto-tls',
  'peer-cert-file',
  'peer-key-file',
  'peer-trusted-ca-file',
  'peer-client-cert-auth',
  'peer-crl-file',
  'peer-cert-allowed-cn',
  'peer-cert-allowed-hostname',
  'peer-auto-tls',
  'self-signed-cert-validity',
  'cipher-suites',
  'tls-min-version',
  'tls-max-version',
]);

function resolveOne(
  c: TlsConfig,
  log: SelfCertLogger,
  peer: boolean,
): TlsMaterial | undefined {
  const files: TlsFiles = peer ? c.peerTls : c.clientTls;
  const common = { tlsMinVersion: c.tlsMinVersion, tlsMaxVersion: c.tlsMaxVersion, cipherSuites: c.cipherSuites };
  let m: TlsMaterial | undefined;
  if (files.autoTls && !tlsFilesEmpty(files)) {
    log.warn(peer ? 'ignoring peer auto TLS since certs given' : 'ignoring client auto TLS since certs given');
  }
  if (files.autoTls && tlsFilesEmpty(files)) {
    const urls = peer ? c.listenPeerUrls : c.listenClientUrls;
    const dir = path.join(c.dataDir, 'fixtures', peer ? 'peer' : 'client');
    const generated = selfCert(log, dir, urls.map((u) => (u.hostname.includes(':') ? `[${u.hostname}]:${u.port}` : `${u.hostname}:${u.port}`)), c.selfSignedCertValidityYears, peer ? ['clientAuth'] : []);
    // etcd replaces the whole TLS info: no CA and no client certificate checks.
    const auto: TlsFiles = { ...files, certFile: generated.certFile, keyFile: generated.keyFile, trustedCaFile: '', clientCertAuth: false, crlFile: '' };
    m = loadTlsMaterial(auto, common, true);
  } else if (!tlsFilesEmpty(files)) {
    m = loadTlsMaterial(files, common);
  }
  if (m !== undefined) {
    log.info(peer ? 'starting with peer TLS' : 'starting with client TLS', {
      'tls-info': describeTls(m),
      'cipher-suites': c.cipherSuites,
    });
  }
  return m;
}

/** Throws (with the file or reason) when configured TLS cannot be loaded. */
export function resolveMemberTls(c: TlsConfig, log: SelfCertLogger): MemberTls {
  return { peer: resolveOne(c, log, true), client: resolveOne(c, log, false) };
}
