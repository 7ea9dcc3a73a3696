// Error classes of the Raft core, with etcd-raft's messages so logs read the same.

export class RaftError extends Error {
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

/** Storage: the requested index precedes the first retained entry. */
export class ErrCompacted extends RaftError {
  constructor() {
    super('requested index is unavailable due to compaction');
  }
}

/** Storage: the requested snapshot is older than the one held. */
export class ErrSnapOutOfDate extends RaftError {
  constructor() {
    super('requested index is older than the existing snapshot');
  }
}

/** Storage: the requested entry lies beyond the last one held. */
export class ErrUnavailable extends RaftError {
  constructor() {
    super('requested entry at index is unavailable');
  }
}

/** Storage: no snapshot can be produced right now; the leader retries later. */
export class ErrSnapshotTemporarilyUnavailable extends RaftError {
  constructor() {
    super('snapshot is temporarily unavailable');
  }
}

/** The proposal was not appended (no leader, leadership transfer, uncommitted-size limit, ...). */
export class ErrProposalDropped extends RaftError {
  constructor() {
    super('raft proposal dropped');
  }
}

export class ErrStepLocalMsg extends RaftError {
  constructor() {
    super('raft: cannot step raft local message');
  }
}

export class ErrStepPeerNotFound extends RaftError {
  constructor() {
    super('raft: cannot step as peer not found');
  }
}
