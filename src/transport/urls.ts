// Peer URLs (etcd's --initial-advertise-peer-urls form) to gRPC targets.
import * as grpc from '@grpc/grpc-js';

export interface PeerTarget {
  url: string;
  /** grpc-js target: "host:port" or "unix:/path". */
  target: string;
  secure: boolean;
}

export function peerTarget(rawUrl: string): PeerTarget {
  const u = new URL(rawUrl.trim());
  const scheme = u.protocol.replace(/:$/, '').toLowerCase();
  switch (scheme) {
    case 'http':
    case 'https': {
      if (u.host === '') throw new Error(`peer URL without host: ${rawUrl}`);
      const port = u.port === '' ? (scheme === 'https' ? '443' : '80') : u.port;
      return { url: rawUrl, target: `${u.hostname}:${port}`, secure: scheme === 'https' };
    }
    case 'unix':
    case 'unixs': {
      const p = u.host + u.pathname;
      if (p === '') throw new Error(`unix peer URL without path: ${rawUrl}`);
      return { url: rawUrl, target: `unix:${p}`, secure: scheme === 'unixs' };
    }
    default:
      throw new Error(`unsupported peer URL scheme: ${rawUrl}`);
  }
}

export function defaultCredentials(secure: boolean): grpc.ChannelCredentials {
  return secure ? grpc.credentials.createSsl() : grpc.credentials.createInsecure();
}
