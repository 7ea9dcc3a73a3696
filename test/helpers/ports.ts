import net from 'node:net';

/** A TCP port that was free on 127.0.0.1 a moment ago (the OS picked it for port 0). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      if (addr === null || typeof addr === 'string') {
        srv.close();
        reject(new Error('no port from listen(0)'));
        return;
      }
      const port = addr.port;
      srv.close(() => resolve(port));
    });
  });
}

/** An http:// URL on 127.0.0.1 whose port nothing listens on (a dead peer). */
export async function deadPeerUrl(): Promise<string> {
  return `http://127.0.0.1:${await freePort()}`;
}
