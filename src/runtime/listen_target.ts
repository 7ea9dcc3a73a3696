// Binding a server to a target as src/transport names them: "host:port" (IPv6 hosts in
// brackets, an empty host for every interface) or "unix:/path".
import type net from 'node:net';

/** Listens `srv` on `target`; resolves with the bound TCP port (0 for a unix socket). */
export function listenOnTarget(srv: net.Server, target: string): Promise<number> {
  return new Promise((resolve, reject) => {
    srv.once('error', reject);
    const done = (): void => {
      srv.off('error', reject);
      const addr = srv.address();
      resolve(addr !== null && typeof addr === 'object' ? addr.port : 0);
    };
    if (target.startsWith('unix:')) {
      srv.listen(target.slice('unix:'.length), done);
    } else {
      const at = target.lastIndexOf(':');
      const host = target.slice(0, at).replace(/^\[(.*)\]$/, '$1');
      srv.listen({ host: host === '' ? undefined : host, port: Number(target.slice(at + 1)) }, done);
    }
  });
}
