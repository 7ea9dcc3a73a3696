import assert from 'node:assert';
import { Progress } from './progress';
import { ConfState, NO_LIMIT, compareIds } from './types';

export const VoteResult = { Pending: 0, Lost: 1, Won: 2 } as const;

/** Outcome of a majority vote among `voters`, given yes/no answers so far. */
export function majorityVoteResult(voters: ReadonlySet<bigint>, answered: (id: bigint) => boolean | undefined): number {
  // An empty configuration wins every election by convention (as etcd), so joint code paths stay simple.
  if (voters.size === 0) return VoteResult.Won;
  let yes = 0;
  let missing = 0;
  for (const id of voters) {
    const v = answered(id);
    if (v === undefined) missing++;
    else if (v) yes++;
  }
  const q = Math.floor(voters.size / 2) + 1;
  if (yes >= q) return VoteResult.Won;
  if (yes + missing >= q) return VoteResult.Pending;
  return VoteResult.Lost;
}

/**
 * Membership (voters, learners) plus each member's Progress and the votes of the current election.
 * Only simple (v1) configurations: one majority, no joint state.
 */
export class ProgressTracker {
  voters = new Set<bigint>();
  learners = new Set<bigint>();
  progress = new Map<bigint, Progress>();
  votes = new Map<bigint, boolean>();
  /**
   * ids() and committed() run several times per proposal on the leader; sorting a fresh copy each
   * time was ~4 KB of garbage per put on a 3-member leader (heap sampling). Membership changes only
   * through confchange.ts, which calls membershipChanged() before the tracker is used.
   */
  private sortedIds: readonly bigint[] | null = null;
  private readonly matchScratch: number[] = [];

  constructor(
    readonly maxInflight: number,
    readonly maxInflightBytes = 0,
  ) {}

  /** Sorted IDs of all members (voters and learners). Shared: callers must not modify it. */
  ids(): readonly bigint[] {
    if (this.sortedIds === null) this.sortedIds = Object.freeze([...this.progress.keys()].sort(compareIds));
    assert(this.sortedIds.length === this.progress.size, 'membership changed without membershipChanged()');
    return this.sortedIds;
  }

  /** Drops what was derived from the membership; confchange.ts calls it after every change. */
  membershipChanged(): void {
    this.sortedIds = null;
  }

  voterIds(): bigint[] {
    return [...this.voters].sort(compareIds);
  }

  /** Visits members in ID order, so message order is deterministic. */
  visit(f: (id: bigint, pr: Progress) => void): void {
    // Indexed: a for-of allocated an iterator per call, several times per write on a leader.
    const ids = this.ids();
    for (let i = 0; i < ids.length; i++) f(ids[i]!, this.progress.get(ids[i]!)!);
  }

  isSingleton(): boolean {
    return this.voters.size === 1;
  }

  /** Largest index acknowledged by a majority of voters (Raft §5.3); learners do not count. */
  committed(): number {
    const n = this.voters.size;
    if (n === 0) return NO_LIMIT;
    // Insertion sort into a reused array: n is a handful of voters, and this runs per acknowledgement.
    const matches = this.matchScratch;
    matches.length = 0;
    for (const id of this.voters) {
      const m = this.progress.get(id)?.match ?? 0;
      let i = matches.length;
      matches.push(m);
      while (i > 0 && matches[i - 1]! > m) {
        matches[i] = matches[i - 1]!;
        i--;
      }
      matches[i] = m;
    }
    assert(matches.length === n);
    return matches[n - (Math.floor(n / 2) + 1)]!;
  }

  /** Whether a majority of voters was heard from since the last check (the leader counts itself). */
  quorumActive(): boolean {
    return majorityVoteResult(this.voters, (id) => this.progress.get(id)?.recentActive ?? false) === VoteResult.Won;
  }

  resetVotes(): void {
    this.votes.clear();
  }

  recordVote(id: bigint, granted: boolean): void {
    if (!this.votes.has(id)) this.votes.set(id, granted);
  }

  tallyVotes(): { granted: number; rejected: number; result: number } {
    let granted = 0;
    let rejected = 0;
    for (const [id, v] of this.votes) {
      if (!this.voters.has(id)) continue;
      if (v) granted++;
      else rejected++;
    }
    return { granted, rejected, result: majorityVoteResult(this.voters, (id) => this.votes.get(id)) };
  }

  confState(): ConfState {
    return {
      voters: [...this.voters].sort(compareIds),
      learners: [...this.learners].sort(compareIds),
      votersOutgoing: [],
      learnersNext: [],
      autoLeave: false,
    };
  }

  checkInvariants(): void {
    if (this.sortedIds !== null) {
      const fresh = [...this.progress.keys()].sort(compareIds);
      assert(fresh.length === this.sortedIds.length && fresh.every((id, i) => id === this.sortedIds![i]), 'stale member ID cache');
    }
    for (const id of this.voters) {
      const pr = this.progress.get(id);
      assert(pr, `no progress for voter ${id}`);
      assert(!pr.isLearner, `voter ${id} is marked learner`);
      assert(!this.learners.has(id), `${id} is both voter and learner`);
    }
    for (const id of this.learners) {
      const pr = this.progress.get(id);
      assert(pr, `no progress for learner ${id}`);
      assert(pr.isLearner, `learner ${id} is not marked learner`);
    }
    for (const id of this.progress.keys()) {
      assert(this.voters.has(id) || this.learners.has(id), `progress for non-member ${id}`);
    }
  }
}
