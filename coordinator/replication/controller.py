"""The controller's decisions for one offsets partition: elections and ISR changes.

Kafka's KRaft controller (replication notes sections 1 and 4):
PartitionChangeBuilder.java `electLeader`, ReplicationControlManager.java
`validateAlterPartitionData`, PartitionRegistration.java `merge`.

Rules:
- `PartitionState` is what the controller persists per partition: the
  assignment, the ISR (in assignment order), the leader (None = none) and
  the two epochs.
- Epochs: a change of leader (to None too) bumps the leader epoch; every
  change bumps the partition epoch; a "change" that changes nothing is not
  recorded and bumps nothing. ISR changes never bump the leader epoch (the
  shrink bump is for metadata versions before 3.6).
- Elections are from the ISR only: the current leader if it is still valid,
  else the first replica in assignment order that is in the ISR and alive.
  An unclean election (only when asked) takes the first alive replica and
  makes it the whole ISR. Otherwise no leader: the partition waits. Dead
  replicas (and replicas whose log failed) leave the ISR at the election,
  except the last one, which stays so the partition waits for it. A replica
  that is alive but did not answer in time (paused, starved) is no
  candidate; it leaves the ISR at the election like a fenced Kafka broker
  (KIP-841), so the new leader commits without it at once, unless the ISR
  would then fall below min.insync.replicas (`isr_at_election`): then
  writes wait for it either way, and it stays in the ISR, electable once it
  answers, as Kafka's eligible leader replicas (KIP-966) stay for the same
  reason: no commit can happen without it, so its log holds every one.
- ISR changes from a leader are validated like `validateAlterPartitionData`,
  in the same order, and every member must be eligible (alive, KIP-841).

Departures: no ELR (KIP-966, off by default at the cited commit) and no
LeaderRecoveryState; an unclean election is flagged on the `Election`.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace

from coordinator.errors import Errors

Replica = str


@dataclass(frozen=True, slots=True)
class PartitionState:
    """The controller's committed view of one partition."""

    replicas: tuple[Replica, ...]
    isr: tuple[Replica, ...]
    leader: Replica | None
    leader_epoch: int
    partition_epoch: int

    def __post_init__(self) -> None:
        if len(set(self.replicas)) != len(self.replicas):
            raise ValueError(f"duplicate replicas in {self.replicas}")
        if not set(self.isr) <= set(self.replicas):
            raise ValueError(f"ISR {self.isr} is not a subset of {self.replicas}")
        if self.leader is not None and self.leader not in self.isr:
            raise ValueError(f"leader {self.leader} is not in the ISR {self.isr}")


@dataclass(frozen=True, slots=True)
class Election:
    leader: Replica | None
    isr: tuple[Replica, ...]
    unclean: bool = False


@dataclass(frozen=True, slots=True)
class IsrChangeResult:
    """The controller's answer to a leader's ISR change: NONE and the new state, or an error."""

    error: Errors
    state: PartitionState


def in_assignment_order(replicas: Sequence[Replica], members: Collection[Replica]) -> tuple[Replica, ...]:
    return tuple(r for r in replicas if r in members)


def elect_leader(
    replicas: Sequence[Replica],
    isr: Collection[Replica],
    alive: Collection[Replica],
    current_leader: Replica | None = None,
    unclean: bool = False,
    candidates: Collection[Replica] | None = None,
) -> Election:
    """Who leads next, and the ISR that goes with it (see the module rules).

    `alive`: the replicas that stay in the ISR (not dead, log not failed);
    `candidates` (default `alive`): those that may lead now, a subset (a
    replica that is alive but did not answer in time stays in the ISR and
    is no candidate)."""
    can_lead = alive if candidates is None else candidates
    target_isr = in_assignment_order(replicas, [r for r in isr if r in alive])
    if not target_isr:
        target_isr = in_assignment_order(replicas, isr)
    valid = [r for r in target_isr if r in can_lead]
    if current_leader in valid:
        return Election(current_leader, target_isr)
    if valid:
        return Election(valid[0], target_isr)
    if unclean:
        for replica in replicas:
            if replica in can_lead:
                return Election(replica, (replica,), unclean=True)
    return Election(None, target_isr)


def isr_at_election(
    isr: Collection[Replica], lost: Collection[Replica], silent: Collection[Replica], min_isr: int
) -> set[Replica]:
    """The ISR members that stay in the ISR at an election (module rules): not `lost`
    (dead, log failed), and not `silent` (alive, no answer) unless the ones that
    answered are fewer than `min_isr`."""
    kept = [r for r in isr if r not in lost]
    answering = [r for r in kept if r not in silent]
    return set(answering if len(answering) >= min_isr else kept)


def apply_election(state: PartitionState, election: Election) -> PartitionState:
    """The state after an election, with Kafka's epoch bumps (unchanged if nothing moved)."""
    if election.leader == state.leader and election.isr == state.isr:
        return state
    leader_epoch = state.leader_epoch + (1 if election.leader != state.leader else 0)
    return replace(
        state,
        isr=election.isr,
        leader=election.leader,
        leader_epoch=leader_epoch,
        partition_epoch=state.partition_epoch + 1,
    )


def validate_isr_change(
    state: PartitionState,
    sender: Replica,
    leader_epoch: int,
    partition_epoch: int,
    new_isr: Sequence[Replica],
    eligible: Collection[Replica],
) -> IsrChangeResult:
    """Kafka's AlterPartition validation, then the committed result.

    Epochs above the controller's mean the controller itself is behind
    (NOT_CONTROLLER); older ones fence the sender. `eligible` is the set of
    replicas the controller sees alive. An ISR equal to the current one is
    accepted without a new partition epoch, as Kafka records no change.
    """
    error = _isr_change_error(state, sender, leader_epoch, partition_epoch, new_isr, eligible)
    if error is not Errors.NONE:
        return IsrChangeResult(error, state)
    isr = in_assignment_order(state.replicas, new_isr)
    if isr == state.isr:
        return IsrChangeResult(Errors.NONE, state)
    return IsrChangeResult(Errors.NONE, replace(state, isr=isr, partition_epoch=state.partition_epoch + 1))


def _isr_change_error(
    state: PartitionState,
    sender: Replica,
    leader_epoch: int,
    partition_epoch: int,
    new_isr: Sequence[Replica],
    eligible: Collection[Replica],
) -> Errors:
    if leader_epoch > state.leader_epoch or partition_epoch > state.partition_epoch:
        return Errors.NOT_CONTROLLER
    if leader_epoch != state.leader_epoch:
        return Errors.FENCED_LEADER_EPOCH
    if sender != state.leader:
        return Errors.INVALID_REQUEST
    if partition_epoch != state.partition_epoch:
        return Errors.INVALID_UPDATE_VERSION
    if len(set(new_isr)) != len(new_isr) or not set(new_isr) <= set(state.replicas):
        return Errors.INVALID_REQUEST
    if state.leader not in new_isr:
        return Errors.INVALID_REQUEST
    if any(r not in eligible for r in new_isr):
        return Errors.INELIGIBLE_REPLICA
    return Errors.NONE
