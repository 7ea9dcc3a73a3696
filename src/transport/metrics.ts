// Hooks for etcd's peer network metrics (etcd_network_peer_sent_bytes_total{To},
// etcd_network_peer_received_bytes_total{From}, etcd_network_peer_sent_failures_total{To},
// etcd_network_peer_received_failures_total{From}, etcd_network_active_peers{Local,Remote},
// etcd_network_disconnected_peers_total{Local,Remote}, etcd_network_peer_round_trip_time_seconds{To},
// etcd_network_known_peers{Local,Remote}). The metrics owner implements them.

export interface TransportMetrics {
  sentBytes(to: bigint, bytes: number): void;
  sentFailure(to: bigint): void;
  receivedBytes(from: bigint, bytes: number): void;
  receivedFailure(from: bigint): void;
  /** A peer's stream became accepted (true) or was lost (false). */
  peerActive(remote: bigint, active: boolean): void;
  /**
   * The prober's smoothed round-trip time to a peer, once per status check (etcd's
   * monitorProbingStatus); only after at least one probe of that peer has succeeded.
   */
  observeRoundTrip?(to: bigint, seconds: number): void;
  /** A remote peer was added to the transport (true) or removed from it (false); not called on stop. */
  knownPeer?(remote: bigint, known: boolean): void;
}

export const NO_METRICS: TransportMetrics = {
  sentBytes: () => {},
  sentFailure: () => {},
  receivedBytes: () => {},
  receivedFailure: () => {},
  peerActive: () => {},
  observeRoundTrip: () => {},
  knownPeer: () => {},
};
