// A fault-injecting TCP proxy for one member's peer URL: peers dial the proxy (the member's
// advertised peer URL), the proxy dials the member's real listen-peer URL. It can cut the link
// from chosen source members, which lets a test partition members on loopback without root.
//
// Each connection's source member is found through /proc: the kernel's TCP table names the
// socket inode of the dialing end, and the member whose process holds that inode is the source.
// Links are cut by resetting connections (and every new one from a cut source), so no bytes of a
// half-forwarded HTTP/2 frame ever reach the other side after the partition heals.
import assert from 'node:assert';
import fs from 'node:fs';
import net from 'node:net';

/** Connections a proxy holds at once; peers keep one or two long-lived streams each. */
const MAX_CONNECTIONS = 256;
/** A source unknown after this long is forwarded anyway (it cannot be cut selectively). */
const IDENTIFY_TIMEOUT_MS = 2_000;

/** Maps a dialing socket (by its local port on 127.0.0.1) to a source name, or undefined. */
export type SourceIdentifier = (remotePort: number, proxyPort: number) => Promise<string | undefined>;

interface Conn {
  client: net.Socket;
  upstream: net.Socket | null;
  source: string | undefined;
}

export class TcpProxy {
  private readonly conns = new Set<Conn>();
  /** Cut sources; ALL cuts every connection, including unidentified ones. */
  private blocked = new Set<string>();
  private blockAll = false;
  private closed = false;
  /** Connections refused or reset because of a cut, for tests that check the proxy did work. */
  droppedConnections = 0;

  private constructor(
    private readonly server: net.Server,
    readonly port: number,
    private readonly targetPort: number,
    private readonly identify: SourceIdentifier | undefined,
  ) {}

  /** Listen on a free port of 127.0.0.1 and forward to `targetPort` there. */
  static async start(opts: { targetPort: number; identify?: SourceIdentifier }): Promise<TcpProxy> {
    assert(opts.targetPort > 0);
    const server = net.createServer({ pauseOnConnect: true });
    server.maxConnections = MAX_CONNECTIONS;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve());
    });
    const addr = server.address();
    assert(addr !== null && typeof addr !== 'string');
    const proxy = new TcpProxy(server, addr.port, opts.targetPort, opts.identify);
    server.on('connection', (s) => void proxy.accept(s));
    return proxy;
  }

  /** Cut the link from these sources (adds to the current cut). */
  block(sources: Iterable<string>): void {
    for (const s of sources) this.blocked.add(s);
    this.enforce();
  }

  /** Cut every connection to this member, whatever its source. */
  blockAllSources(): void {
    this.blockAll = true;
    this.enforce();
  }

  heal(): void {
    this.blocked = new Set();
    this.blockAll = false;
  }

  isCut(source: string | undefined): boolean {
    return this.blockAll || (source !== undefined && this.blocked.has(source));
  }

  connectionCount(): number {
    return this.conns.size;
  }

  /** Sources of the open connections (undefined for unidentified ones). */
  sources(): Array<string | undefined> {
    return [...this.conns].map((c) => c.source);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const c of this.conns) this.destroy(c);
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private async accept(client: net.Socket): Promise<void> {
    const conn: Conn = { client, upstream: null, source: undefined };
    this.conns.add(conn);
    client.on('error', () => this.destroy(conn));
    client.on('close', () => this.destroy(conn));
    if (this.identify && client.remotePort !== undefined) {
      conn.source = await withTimeout(this.identify(client.remotePort, this.port), IDENTIFY_TIMEOUT_MS).catch(() => undefined);
    }
    if (client.destroyed || this.closed) return this.destroy(conn);
    if (this.isCut(conn.source)) {
      this.droppedConnections++;
      // A reset, as a dead route would eventually give; the dialer backs off and retries.
      client.resetAndDestroy();
      return this.destroy(conn);
    }
    const upstream = net.connect({ host: '127.0.0.1', port: this.targetPort });
    conn.upstream = upstream;
    upstream.on('error', () => this.destroy(conn));
    upstream.on('close', () => this.destroy(conn));
    upstream.on('connect', () => {
      client.pipe(upstream);
      upstream.pipe(client);
      client.resume();
    });
  }

  private enforce(): void {
    for (const c of this.conns) {
      if (this.isCut(c.source)) {
        this.droppedConnections++;
        if (!c.client.destroyed) c.client.resetAndDestroy();
        this.destroy(c);
      }
    }
  }

  private destroy(c: Conn): void {
    if (!this.conns.delete(c)) return;
    if (!c.client.destroyed) c.client.destroy();
    if (c.upstream && !c.upstream.destroyed) c.upstream.resetAndDestroy();
  }
}

function withTimeout<T>(p: Promise<T>, ms: number): Promise<T | undefined> {
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => resolve(undefined), ms);
    p.then(
      (v) => {
        clearTimeout(t);
        resolve(v);
      },
      (e: unknown) => {
        clearTimeout(t);
        reject(e);
      },
    );
  });
}

/**
 * The inode of the socket whose local end is 127.0.0.1:`localPort` connected to port `peerPort`,
 * read from the kernel's TCP tables, or undefined.
 */
export function socketInode(localPort: number, peerPort: number): number | undefined {
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text: string;
    try {
      text = fs.readFileSync(table, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      if (f.length < 10) continue;
      const local = portOf(f[1]!);
      const remote = portOf(f[2]!);
      if (local === localPort && remote === peerPort) {
        const inode = Number(f[9]);
        if (inode > 0) return inode;
      }
    }
  }
  return undefined;
}

function portOf(hexAddr: string): number {
  const i = hexAddr.lastIndexOf(':');
  return parseInt(hexAddr.slice(i + 1), 16);
}

/** Whether process `pid` holds socket `inode` among its open files. */
export function pidHoldsSocket(pid: number, inode: number): boolean {
  const want = `socket:[${inode}]`;
  let fds: string[];
  try {
    fds = fs.readdirSync(`/proc/${pid}/fd`);
  } catch {
    return false;
  }
  for (const fd of fds) {
    try {
      if (fs.readlinkSync(`/proc/${pid}/fd/${fd}`) === want) return true;
    } catch {
      // closed meanwhile
    }
  }
  return false;
}

/** Direct children of `pid` (needs /proc/<pid>/task/<pid>/children). */
export function childPids(pid: number): number[] {
  try {
    return fs
      .readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8')
      .trim()
      .split(/\s+/)
      .filter((s) => s !== '')
      .map(Number);
  } catch {
    return [];
  }
}
