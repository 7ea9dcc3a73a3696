// Which gRPC target reaches the listener a connection came in on. The listener records it
// at accept time; the JSON gateway uses it to call back into the same port (as etcd's
// gateway dials its own listener). Unix sockets carry no local address, hence the map.
import type net from 'node:net';

const targets = new WeakMap<net.Socket, string>();

export function setLocalTarget(socket: net.Socket, target: string): void {
  targets.set(socket, target);
}

export function localTargetOf(socket: net.Socket): string | undefined {
  const t = targets.get(socket);
  if (t !== undefined) return t;
  if (socket.localPort !== undefined && socket.localAddress) {
    const host = socket.localAddress.includes(':') ? `[${socket.localAddress}]` : socket.localAddress;
    return `${host}:${socket.localPort}`;
  }
  return undefined;
}
