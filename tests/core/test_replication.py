"""The replication state machine (coordinator/replication): epoch cache, divergence,
the leader's ISR and high-watermark rules, controller decisions, error mapping.

Manual clock, no Ray. Scenario numbers refer to replication-notes.md.
"""

from __future__ import annotations

import pytest

from coordinator.errors import Errors
from coordinator.replication import (
    UNDEFINED,
    UNDEFINED_EPOCH,
    AckResult,
    EpochCache,
    IsrChangeKind,
    LeaderState,
    PartitionState,
    RejectAction,
    Truncation,
    apply_election,
    check_leader_epoch,
    check_push_epoch,
    diverging_epoch,
    elect_leader,
    follower_high_watermark,
    group_error,
    isr_at_election,
    truncation_offset,
    validate_isr_change,
)

LAG_MS = 1000

# -- epoch cache ----------------------------------------------------------


def test_assign_ignores_a_repeat_of_the_latest_epoch() -> None:
    cache = EpochCache([(1, 0), (3, 10)])
    assert cache.assign(3, 15) is False
    assert cache.entries == [(1, 0), (3, 10)]


def test_assign_drops_entries_that_would_break_monotonicity() -> None:
    cache = EpochCache([(1, 0), (3, 10), (5, 20)])
    # Epoch 4 at 12: epoch 5 is larger, so it goes; epoch 3 (from 10) stays.
    assert cache.assign(4, 12) is True
    assert cache.entries == [(1, 0), (3, 10), (4, 12)]
    # Same latest epoch at a smaller start rewrites it; a start below earlier epochs drops them.
    cache.assign(4, 5)
    assert cache.entries == [(1, 0), (4, 5)]
    assert cache.latest_epoch == 4


def test_end_offset_for_follows_kafka() -> None:
    cache = EpochCache([(1, 0), (2, 10), (4, 20)])
    assert cache.end_offset_for(4, 30) == (4, 30)  # latest: the log end
    assert cache.end_offset_for(2, 30) == (2, 20)  # start of the next higher epoch
    assert cache.end_offset_for(3, 30) == (2, 20)  # unknown epoch: the largest below it
    assert cache.end_offset_for(0, 30) == (0, 0)  # below every entry: start of the first
    assert cache.end_offset_for(5, 30) == UNDEFINED  # above every entry
    assert cache.end_offset_for(UNDEFINED_EPOCH, 30) == UNDEFINED
    assert EpochCache().end_offset_for(1, 30) == UNDEFINED
    assert EpochCache().latest_epoch == UNDEFINED_EPOCH


def test_truncation_from_either_end() -> None:
    cache = EpochCache([(1, 0), (2, 10), (4, 20)])
    cache.truncate_from_end(20)
    assert cache.entries == [(1, 0), (2, 10)]
    cache.truncate_from_end(15)  # epoch 2 still covers 10..14
    assert cache.entries == [(1, 0), (2, 10)]
    cache.truncate_from_start(12)
    assert cache.entries == [(2, 12)]


# -- divergence -----------------------------------------------------------


def test_worked_example_of_the_notes() -> None:
    """Section 5: B leads epoch 4 from 111; A returns with its epoch-3 record at 111."""
    b_cache = EpochCache([(3, 100), (4, 111)])
    b_leo = 113
    # C stopped at 110 in epoch 3: a prefix of B's log.
    assert diverging_epoch(b_cache, b_leo, follower_leo=110, follower_last_epoch=3) is None
    # A: ..., 110(e3), 111(e3), LEO 112.
    a_cache = EpochCache([(3, 100)])
    diverging = diverging_epoch(b_cache, b_leo, follower_leo=112, follower_last_epoch=3)
    assert diverging == (3, 111)
    assert truncation_offset(a_cache, 112, diverging) == Truncation(111, complete=True)
    a_cache.truncate_from_end(111)
    assert a_cache.entries == [(3, 100)]
    assert diverging_epoch(b_cache, b_leo, follower_leo=111, follower_last_epoch=3) is None


def test_two_leaders_with_different_suffixes_converge_kip_279() -> None:
    """Epoch 2 (leader A) and epoch 3 (leader B) both wrote from offset 10; A, back as
    leader of epoch 4, never saw epoch 3. B truncates in two rounds and copies A's log."""
    common = [(1, f"r{o}") for o in range(10)]
    a_log = common + [(2, f"a{o}") for o in range(10, 15)] + [(4, f"a{o}") for o in range(15, 17)]
    a_cache = EpochCache([(1, 0), (2, 10), (4, 15)])
    b_log = common + [(3, f"b{o}") for o in range(10, 13)]
    b_cache = EpochCache([(1, 0), (3, 10)])

    rounds = []
    while (diverging := diverging_epoch(a_cache, len(a_log), len(b_log), b_cache.latest_epoch)) is not None:
        truncation = truncation_offset(b_cache, len(b_log), diverging)
        rounds.append((diverging, truncation))
        del b_log[truncation.offset :]
        b_cache.truncate_from_end(truncation.offset)
        assert len(rounds) < 5
    assert rounds == [((2, 15), Truncation(10, complete=False))]
    # Resume from B's log end: copy A's records and their epochs.
    for offset in range(len(b_log), len(a_log)):
        b_log.append(a_log[offset])
        b_cache.assign(a_log[offset][0], offset)
    assert b_log == a_log
    assert b_cache.entries == a_cache.entries


def test_kip_279_iteration_needs_a_second_round() -> None:
    leader = EpochCache([(1, 0), (3, 15), (5, 25)])
    follower = EpochCache([(1, 0), (2, 10), (4, 20)])
    first = diverging_epoch(leader, 40, 30, follower.latest_epoch)
    assert first == (3, 25)
    assert truncation_offset(follower, 30, first) == Truncation(20, complete=False)
    follower.truncate_from_end(20)
    second = diverging_epoch(leader, 40, 20, follower.latest_epoch)
    assert second == (1, 15)
    assert truncation_offset(follower, 20, second) == Truncation(10, complete=True)
    follower.truncate_from_end(10)
    assert diverging_epoch(leader, 40, 10, follower.latest_epoch) is None


def test_no_epochs_known() -> None:
    leader = EpochCache([(1, 0), (2, 10)])
    # An empty follower has nothing that can diverge.
    assert diverging_epoch(leader, 20, 0, UNDEFINED_EPOCH) is None
    # Records but no epochs: resync from 0 (our departure from truncate-to-HWM).
    diverging = diverging_epoch(leader, 20, 7, UNDEFINED_EPOCH)
    assert diverging == (UNDEFINED_EPOCH, 0)
    assert truncation_offset(EpochCache(), 7, diverging) == Truncation(0, complete=True)
    # A follower with no epoch at or below the leader's answer takes the leader's offset.
    assert truncation_offset(EpochCache(), 8, (2, 5)) == Truncation(5, complete=True)
    # A follower newer than its leader was not fenced: a caller bug.
    with pytest.raises(ValueError):
        diverging_epoch(leader, 20, 12, 3)


def test_leader_epoch_fencing_checks() -> None:
    assert check_leader_epoch(5, 4) is Errors.FENCED_LEADER_EPOCH
    assert check_leader_epoch(5, 6) is Errors.UNKNOWN_LEADER_EPOCH
    assert check_leader_epoch(5, 5) is Errors.NONE
    assert check_push_epoch(5, 4) is Errors.FENCED_LEADER_EPOCH
    assert check_push_epoch(5, 6) is Errors.NONE


def test_follower_takes_the_hwm_only_at_a_checked_position() -> None:
    # A probe (or a push elsewhere than its log end) leaves it alone.
    assert follower_high_watermark(3, 50, None, 12, 12) == 3
    assert follower_high_watermark(3, 50, 10, 12, 12) == 3
    # A push at its log end: the leader's HWM, clamped to its log end.
    assert follower_high_watermark(3, 50, 12, 12, 20) == 20
    assert follower_high_watermark(3, 15, 12, 12, 20) == 15


# -- the leader -----------------------------------------------------------


def leader_state(
    *,
    replicas: tuple[str, ...] = ("a", "b", "c"),
    isr: tuple[str, ...] = ("a", "b", "c"),
    min_isr: int = 2,
    start: int = 100,
    hwm: int = 100,
    now_ms: int = 0,
) -> LeaderState:
    return LeaderState(
        replicas=replicas,
        isr=isr,
        leader="a",
        leader_epoch=5,
        partition_epoch=7,
        epoch_cache=EpochCache([(3, 0)]),
        epoch_start_offset=start,
        min_insync_replicas=min_isr,
        replica_lag_time_max_ms=LAG_MS,
        now_ms=now_ms,
        high_watermark=hwm,
    )


def ack(state: LeaderState, replica: str, leo: int, now_ms: int, epoch: int = 5) -> Errors:
    result = state.on_follower_ack(replica, state.leader_epoch, leo, epoch, now_ms)
    assert result.diverging is None
    return result.error


def test_promotion_assigns_the_epoch_and_starts_with_followers_unknown() -> None:
    state = leader_state(hwm=90)
    assert state.epoch_cache.entries == [(3, 0), (5, 100)]
    assert state.next_fetch_offset("b") is None
    state.on_local_durable(110, now_ms=0)
    assert state.high_watermark == 90  # ISR followers' log ends are unknown
    ack(state, "b", 100, now_ms=1)
    assert state.next_fetch_offset("b") == 100
    assert state.high_watermark == 90
    ack(state, "c", 105, now_ms=2)
    assert state.high_watermark == 100


def test_hwm_is_the_minimum_over_the_isr_and_never_past_the_durable_end() -> None:
    state = leader_state()
    state.on_local_append(120, now_ms=0)
    ack(state, "b", 120, now_ms=1)
    ack(state, "c", 115, now_ms=1)
    assert state.high_watermark == 100  # the leader's own copy is not durable yet
    state.on_local_durable(110, now_ms=2)
    assert state.high_watermark == 110
    state.on_local_durable(120, now_ms=3)
    assert state.high_watermark == 115
    ack(state, "c", 112, now_ms=4)  # a lower answer never moves the HWM back
    assert state.high_watermark == 115


def test_below_min_isr_nothing_is_writable_and_the_hwm_stays() -> None:
    state = leader_state(isr=("a",), min_isr=2)
    assert state.writable is False
    state.on_local_durable(110, now_ms=0)
    ack(state, "b", 110, now_ms=1)
    assert state.high_watermark == 100
    # min ISR is capped by the replica count.
    alone = leader_state(replicas=("a",), isr=("a",), min_isr=2)
    assert alone.effective_min_isr == 1 and alone.writable is True
    alone.on_local_durable(110, now_ms=0)
    assert alone.high_watermark == 110


def test_shrink_waits_for_the_controller_and_counts_the_leaving_member_meanwhile() -> None:
    state = leader_state()
    state.on_local_durable(120, now_ms=0)
    ack(state, "b", 105, now_ms=10)
    ack(state, "c", 120, now_ms=10)
    assert state.high_watermark == 105
    state.tick(LAG_MS)  # b caught up at promotion (time 0): exactly at the limit
    assert state.pending_isr_change is None
    state.tick(LAG_MS + 1)
    change = state.pending_isr_change
    assert change is not None and change.kind is IsrChangeKind.SHRINK
    assert (change.isr, change.leader_epoch, change.partition_epoch) == (("a", "c"), 5, 7)
    assert state.maximal_isr == ("a", "b", "c")
    state.tick(LAG_MS + 2)
    assert state.high_watermark == 105  # b still counts while the shrink is pending
    assert state.on_isr_committed(("a", "c"), 5, 8, now_ms=LAG_MS + 3) is True
    assert state.isr == ("a", "c") and state.partition_epoch == 8
    assert state.high_watermark == 120


def test_a_follower_the_controller_drops_holds_the_hwm_back_only_once_it_answers_again() -> None:
    state = leader_state()
    state.on_local_durable(120, now_ms=0)
    ack(state, "b", 120, now_ms=1)
    ack(state, "c", 120, now_ms=1)
    assert state.high_watermark == 120
    # The controller takes c out (a rolling restart stopped it): its answers from before
    # no longer count, though it was caught up a moment ago.
    assert state.on_isr_committed(("a", "b"), 5, 8, now_ms=2)
    state.on_local_durable(150, now_ms=3)
    ack(state, "b", 150, now_ms=4)
    assert state.high_watermark == 150
    # Back and caught up: it holds the HWM again, and is proposed for the ISR.
    state.on_local_durable(160, now_ms=5)
    ack(state, "c", 150, now_ms=6)
    ack(state, "b", 160, now_ms=6)
    assert state.high_watermark == 150
    change = state.pending_isr_change
    assert change is not None and (change.kind, change.isr) == (IsrChangeKind.EXPAND, ("a", "b", "c"))


def test_a_follower_whose_disk_failed_is_out_of_sync_at_once_and_back_only_by_acks() -> None:
    state = leader_state()
    state.on_local_durable(120, now_ms=0)
    ack(state, "b", 120, now_ms=1)
    ack(state, "c", 110, now_ms=1)
    state.on_follower_failed("c", now_ms=2)  # KAFKA_STORAGE_ERROR: no waiting for the lag time
    change = state.pending_isr_change
    assert change is not None and (change.kind, change.isr) == (IsrChangeKind.SHRINK, ("a", "b"))
    assert state.next_fetch_offset("c") is None and not state.is_caught_up("c", now_ms=2)
    assert state.on_isr_committed(("a", "b"), 5, 8, now_ms=3)
    assert state.high_watermark == 120
    state.on_follower_failed("x", now_ms=4)  # not a replica: ignored
    ack(state, "c", 120, now_ms=5)  # recovered and caught up: proposed again like any returning follower
    expand = state.pending_isr_change
    assert expand is not None and (expand.kind, expand.isr) == (IsrChangeKind.EXPAND, ("a", "b", "c"))


def test_a_follower_keeping_up_with_a_stream_of_appends_stays_in_sync() -> None:
    state = leader_state()
    ack(state, "c", 100, now_ms=0)
    ack(state, "b", 100, now_ms=0)
    state.on_local_durable(110, now_ms=500)
    ack(state, "b", 100, now_ms=900)  # reached the leader end seen at its previous answer
    state.on_local_durable(120, now_ms=1000)
    ack(state, "b", 110, now_ms=1400)  # reached the end seen at 900: caught up as of 900
    assert state.follower("b").last_caught_up_ms == 900
    state.tick(1900)
    assert state.pending_isr_change is not None
    assert state.pending_isr_change.isr == ("a", "b")  # c, silent since 0, leaves; b stays
    state.on_isr_rejected(state.pending_isr_change, Errors.INELIGIBLE_REPLICA, now_ms=1900)
    ack(state, "c", 120, now_ms=1900)
    state.tick(1901)
    assert state.pending_isr_change is not None and state.pending_isr_change.isr == ("a", "c")


def test_expand_needs_the_hwm_and_the_epoch_start_offset() -> None:
    """KAFKA-7128: a follower at the HWM but below the epoch start may not join."""
    state = leader_state(isr=("a", "c"), start=100, hwm=90)
    state.on_local_durable(130, now_ms=0)
    ack(state, "b", 80, now_ms=1)
    assert state.pending_isr_change is None  # below the HWM
    ack(state, "b", 95, now_ms=2)
    assert state.pending_isr_change is None  # at the HWM (90) but below the epoch start
    ack(state, "c", 130, now_ms=3)
    assert state.high_watermark == 130  # b is not caught up, so it holds nothing back
    ack(state, "b", 130, now_ms=4)
    change = state.pending_isr_change
    assert change is not None and change.kind is IsrChangeKind.EXPAND and change.isr == ("a", "b", "c")


def test_a_pending_expand_counts_the_candidate_and_a_revert_drops_it() -> None:
    state = leader_state(isr=("a", "c"), hwm=100)
    state.on_local_durable(130, now_ms=0)
    ack(state, "b", 110, now_ms=1)  # >= HWM and epoch start: proposed
    assert state.pending_isr_change is not None
    assert state.maximal_isr == ("a", "b", "c")
    ack(state, "c", 130, now_ms=2)
    assert state.high_watermark == 110  # the candidate holds the HWM back
    change = state.pending_isr_change
    assert state.on_isr_rejected(change, Errors.INELIGIBLE_REPLICA, now_ms=3) is RejectAction.REVERTED
    assert state.pending_isr_change is None and state.isr == ("a", "c")
    assert state.high_watermark == 130


def test_isr_rejections_follow_kafka() -> None:
    state = leader_state()
    state.tick(LAG_MS + 1)
    change = state.pending_isr_change
    assert change is not None
    await_metadata = state.on_isr_rejected(change, Errors.INVALID_UPDATE_VERSION, now_ms=0)
    assert await_metadata is RejectAction.AWAIT_METADATA
    assert state.on_isr_rejected(change, Errors.UNKNOWN_SERVER_ERROR, now_ms=0) is RejectAction.RESUBMIT
    assert state.pending_isr_change == change
    # New metadata adopts the committed ISR and clears the pending change.
    assert state.on_isr_committed(("a", "b", "c"), 5, 9, now_ms=0) is True
    assert state.pending_isr_change is None
    assert state.on_isr_rejected(change, Errors.INELIGIBLE_REPLICA, now_ms=0) is RejectAction.IGNORED


def test_the_current_version_again_does_not_clear_a_proposal_in_flight() -> None:
    """Found by the simulation: clearing it let the HWM pass the candidate, and the
    controller then committed the request still in flight."""
    state = leader_state(isr=("a", "c"))
    state.on_local_durable(130, now_ms=0)
    ack(state, "b", 110, now_ms=1)
    change = state.pending_isr_change
    assert change is not None and change.kind is IsrChangeKind.EXPAND
    assert state.on_isr_committed(("a", "c"), 5, 7, now_ms=2) is False
    ack(state, "c", 130, now_ms=3)
    assert state.pending_isr_change == change and state.high_watermark == 110
    # The controller's "already so" answer to the proposal itself is adopted.
    assert state.on_isr_committed(change.isr, 5, 7, now_ms=4) is True
    assert state.isr == ("a", "b", "c") and state.pending_isr_change is None


def test_stale_epochs_are_ignored_by_the_leader() -> None:
    state = leader_state()
    state.on_local_durable(110, now_ms=0)
    assert state.on_follower_ack("b", 4, 110, 5, now_ms=1).error is Errors.FENCED_LEADER_EPOCH
    assert state.on_follower_ack("b", 6, 110, 5, now_ms=1).error is Errors.UNKNOWN_LEADER_EPOCH
    assert state.on_follower_ack("z", 5, 110, 5, now_ms=1).error is Errors.NOT_LEADER_OR_FOLLOWER
    assert state.follower("b").log_end is None
    # A committed ISR from another leader epoch or an older partition epoch is ignored.
    assert state.on_isr_committed(("a",), 4, 9, now_ms=1) is False
    assert state.on_isr_committed(("a",), 5, 6, now_ms=1) is False
    assert state.isr == ("a", "b", "c")


def test_a_diverging_answer_is_not_an_acknowledgement() -> None:
    state = leader_state(start=100)
    state.on_local_durable(105, now_ms=0)
    result = state.on_follower_ack("b", 5, 102, 3, now_ms=1)  # b has epoch-3 records past 100
    assert result.error is Errors.NONE and result.diverging == (3, 100)
    assert state.follower("b").log_end is None
    assert state.next_fetch_offset("b") is None
    ack(state, "b", 100, now_ms=2, epoch=3)
    assert state.next_fetch_offset("b") == 100


def confirm(state: LeaderState, replica: str, seq: int, leo: int = 100, epoch: int = 5) -> AckResult:
    """An answer of `replica` to push `seq`, its log ending at `leo` with epoch-3 records."""
    return state.on_follower_ack(replica, epoch, leo, 3, now_ms=1, push_seq=seq)


def test_reads_are_confirmed_by_every_maximal_isr_follower_answering_a_later_push() -> None:
    """Issue 24 item 3, the leader's side: push numbers and confirmation."""
    state = leader_state(isr=("a", "b"))  # c is outside the ISR
    assert state.confirmed_seq == 0 and state.push_seq == 0
    fence = state.push_seq  # a read decided now waits for push 1 or later
    first = state.on_push_sent()  # to b, before a pause, say
    assert first == 1
    confirm(state, "c", first, leo=90)  # behind the HWM: not proposed for the ISR
    assert state.pending_isr_change is None
    assert state.confirmed_seq == 0  # c is no ISR member: it cannot be elected
    confirm(state, "b", first)
    assert state.confirmed_seq == 1 > fence
    # A later read waits for a push after its own decision, not a late answer to an earlier one.
    fence = state.push_seq
    second = state.on_push_sent()
    confirm(state, "b", first)
    assert state.confirmed_seq == 1 == fence
    confirm(state, "b", second)
    assert state.confirmed_seq == 2 > fence
    with pytest.raises(ValueError):
        confirm(state, "b", 3)  # never sent


def test_answers_of_another_epoch_confirm_nothing_and_a_diverging_one_does() -> None:
    state = leader_state()
    seq = state.on_push_sent()
    assert confirm(state, "b", seq, epoch=6).error is Errors.UNKNOWN_LEADER_EPOCH
    assert confirm(state, "b", seq, epoch=4).error is Errors.FENCED_LEADER_EPOCH
    assert state.follower("b").confirmed_seq == 0
    state.on_local_durable(105, now_ms=0)
    diverging = state.on_follower_ack("b", 5, 102, 3, now_ms=1, push_seq=seq)
    assert diverging.diverging is not None  # not an acknowledgement of records, but of the epoch
    confirm(state, "c", seq)
    assert state.confirmed_seq == seq


def test_the_maximal_isr_decides_who_must_confirm() -> None:
    state = leader_state(isr=("a", "c"))
    state.on_local_durable(130, now_ms=0)
    seq = state.on_push_sent()
    confirm(state, "c", seq)
    assert state.confirmed_seq == seq
    ack(state, "b", 110, now_ms=1)  # a pending expand: b counts from now on
    assert state.pending_isr_change is not None and state.confirmed_seq == 0
    confirm(state, "b", seq, leo=110)
    assert state.confirmed_seq == seq
    alone = leader_state(isr=("a",))
    assert alone.confirmed_seq is None  # no other ISR member: nothing to confirm
    assert leader_state(replicas=("a",), isr=("a",)).confirmed_seq is None


def test_a_new_epoch_of_the_leader_numbers_its_pushes_on() -> None:
    state = LeaderState(
        replicas=("a", "b"), isr=("a", "b"), leader="a", leader_epoch=6, partition_epoch=8,
        epoch_cache=EpochCache(), epoch_start_offset=0, min_insync_replicas=1,
        replica_lag_time_max_ms=LAG_MS, now_ms=0, push_seq=41,
    )
    assert state.confirmed_seq == 0  # nothing of the earlier epoch counts as confirmed
    assert state.on_push_sent() == 42


def test_the_leader_log_never_shrinks_within_an_epoch() -> None:
    state = leader_state()
    state.on_local_append(110, now_ms=0)
    with pytest.raises(ValueError):
        state.on_local_append(105, now_ms=1)


# -- the controller -------------------------------------------------------

REPLICAS = ("a", "b", "c")


def test_election_keeps_a_valid_leader_else_takes_the_first_isr_member_alive() -> None:
    assert elect_leader(REPLICAS, {"a", "b", "c"}, {"a", "b", "c"}, current_leader="b").leader == "b"
    election = elect_leader(REPLICAS, {"b", "c"}, {"a", "c"}, current_leader="b")
    assert (election.leader, election.isr, election.unclean) == ("c", ("c",), False)


def test_election_never_leaves_the_isr_unless_unclean_is_asked() -> None:
    election = elect_leader(REPLICAS, {"b"}, {"a", "c"})
    assert (election.leader, election.isr) == (None, ("b",))  # the last member stays: wait for it
    unclean = elect_leader(REPLICAS, {"b"}, {"a", "c"}, unclean=True)
    assert (unclean.leader, unclean.isr, unclean.unclean) == ("a", ("a",), True)
    assert elect_leader(REPLICAS, {"b"}, set(), unclean=True).leader is None


def test_election_keeps_a_silent_replica_in_the_isr_but_never_lets_it_lead() -> None:
    # b is alive but did not answer (no candidate); c's disk failed (not alive for the ISR).
    election = elect_leader(REPLICAS, {"a", "b", "c"}, {"a", "b"}, candidates={"a"})
    assert (election.leader, election.isr) == ("a", ("a", "b"))
    waiting = elect_leader(REPLICAS, {"b", "c"}, {"a", "b"}, candidates={"a"})
    assert (waiting.leader, waiting.isr) == (None, ("b",))  # b holds the log: wait for it to answer
    unclean = elect_leader(REPLICAS, {"c"}, {"a", "b"}, candidates={"a"}, unclean=True)
    assert (unclean.leader, unclean.unclean) == ("a", True)


def test_a_silent_replica_leaves_the_isr_at_an_election_unless_min_isr_needs_it() -> None:
    # a is dead, c's disk failed, b did not answer: b alone is below min ISR 2, so b stays.
    assert isr_at_election(REPLICAS, lost={"a", "c"}, silent={"b"}, min_isr=2) == {"b"}
    # a dead, b silent, c answers: c alone is below min ISR 2: b stays beside it.
    assert isr_at_election(REPLICAS, lost={"a"}, silent={"b"}, min_isr=2) == {"b", "c"}
    # with min ISR 1, c commits alone: the silent b leaves (Kafka fences it).
    assert isr_at_election(REPLICAS, lost={"a"}, silent={"b"}, min_isr=1) == {"c"}
    assert isr_at_election(REPLICAS, lost=set(), silent={"a"}, min_isr=2) == {"b", "c"}


def test_epoch_bumps() -> None:
    state = PartitionState(REPLICAS, REPLICAS, "a", leader_epoch=3, partition_epoch=10)
    assert apply_election(state, elect_leader(REPLICAS, state.isr, REPLICAS, "a")) is state
    isr_only = apply_election(state, elect_leader(REPLICAS, state.isr, {"a", "b"}, "a"))
    assert (isr_only.leader, isr_only.isr, isr_only.leader_epoch, isr_only.partition_epoch) == (
        "a",
        ("a", "b"),
        3,
        11,
    )
    moved = apply_election(isr_only, elect_leader(REPLICAS, isr_only.isr, {"b"}, "a"))
    assert (moved.leader, moved.isr, moved.leader_epoch, moved.partition_epoch) == ("b", ("b",), 4, 12)
    gone = apply_election(moved, elect_leader(REPLICAS, moved.isr, set(), "b"))
    assert (gone.leader, gone.isr, gone.leader_epoch, gone.partition_epoch) == (None, ("b",), 5, 13)


@pytest.mark.parametrize(
    ("sender", "leader_epoch", "partition_epoch", "isr", "eligible", "error"),
    [
        ("a", 2, 10, ("a", "b"), REPLICAS, Errors.FENCED_LEADER_EPOCH),
        ("a", 4, 10, ("a", "b"), REPLICAS, Errors.NOT_CONTROLLER),
        ("b", 3, 10, ("a", "b"), REPLICAS, Errors.INVALID_REQUEST),
        ("a", 3, 9, ("a", "b"), REPLICAS, Errors.INVALID_UPDATE_VERSION),
        ("a", 3, 10, ("a", "d"), REPLICAS, Errors.INVALID_REQUEST),
        ("a", 3, 10, ("a", "a"), REPLICAS, Errors.INVALID_REQUEST),
        ("a", 3, 10, ("b", "c"), REPLICAS, Errors.INVALID_REQUEST),
        ("a", 3, 10, ("a", "b", "c"), ("a", "b"), Errors.INELIGIBLE_REPLICA),
    ],
)
def test_isr_change_validation(
    sender: str,
    leader_epoch: int,
    partition_epoch: int,
    isr: tuple[str, ...],
    eligible: tuple[str, ...],
    error: Errors,
) -> None:
    state = PartitionState(REPLICAS, ("a", "b"), "a", leader_epoch=3, partition_epoch=10)
    result = validate_isr_change(state, sender, leader_epoch, partition_epoch, isr, eligible)
    assert result.error is error
    assert result.state is state


def test_a_valid_isr_change_bumps_only_the_partition_epoch() -> None:
    state = PartitionState(REPLICAS, ("a", "b"), "a", leader_epoch=3, partition_epoch=10)
    result = validate_isr_change(state, "a", 3, 10, ("c", "a", "b"), REPLICAS)
    assert result.error is Errors.NONE
    assert (result.state.isr, result.state.leader_epoch, result.state.partition_epoch) == (REPLICAS, 3, 11)
    same = validate_isr_change(state, "a", 3, 10, ("b", "a"), REPLICAS)
    assert same.error is Errors.NONE and same.state is state


def test_an_isr_change_from_a_deposed_leader_is_fenced() -> None:
    state = PartitionState(REPLICAS, REPLICAS, "a", leader_epoch=3, partition_epoch=10)
    leader = LeaderState(
        replicas=REPLICAS,
        isr=REPLICAS,
        leader="a",
        leader_epoch=3,
        partition_epoch=10,
        epoch_cache=EpochCache(),
        epoch_start_offset=0,
        min_insync_replicas=2,
        replica_lag_time_max_ms=LAG_MS,
        now_ms=0,
    )
    leader.tick(LAG_MS + 1)
    change = leader.pending_isr_change
    assert change is not None
    state = apply_election(state, elect_leader(REPLICAS, state.isr, {"b", "c"}, "a"))
    result = validate_isr_change(
        state, change.leader, change.leader_epoch, change.partition_epoch, change.isr, {"b", "c"}
    )
    assert result.error is Errors.FENCED_LEADER_EPOCH
    assert leader.on_isr_rejected(change, result.error, now_ms=LAG_MS + 2) is RejectAction.AWAIT_METADATA


# -- errors for group requests --------------------------------------------


@pytest.mark.parametrize(
    ("write_error", "group", "offset_fetch"),
    [
        (Errors.NOT_ENOUGH_REPLICAS, Errors.COORDINATOR_NOT_AVAILABLE, Errors.NOT_COORDINATOR),
        (Errors.REQUEST_TIMED_OUT, Errors.COORDINATOR_NOT_AVAILABLE, Errors.NOT_COORDINATOR),
        (Errors.NOT_LEADER_OR_FOLLOWER, Errors.NOT_COORDINATOR, Errors.NOT_COORDINATOR),
        (Errors.KAFKA_STORAGE_ERROR, Errors.NOT_COORDINATOR, Errors.NOT_COORDINATOR),
        (Errors.UNKNOWN_TOPIC_OR_PARTITION, Errors.COORDINATOR_NOT_AVAILABLE, Errors.NOT_COORDINATOR),
        (
            Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
            Errors.COORDINATOR_NOT_AVAILABLE,
            Errors.COORDINATOR_NOT_AVAILABLE,
        ),
        (Errors.INVALID_REQUEST, Errors.INVALID_REQUEST, Errors.INVALID_REQUEST),
    ],
)
def test_group_errors_for_replication_failures(
    write_error: Errors, group: Errors, offset_fetch: Errors
) -> None:
    assert group_error(write_error) is group
    assert group_error(write_error, offset_fetch=True) is offset_fetch


def test_new_error_codes_carry_kafka_numbers() -> None:
    assert [
        Errors.NOT_LEADER_OR_FOLLOWER,
        Errors.NOT_ENOUGH_REPLICAS,
        Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        Errors.NOT_CONTROLLER,
        Errors.OPERATION_NOT_ATTEMPTED,
        Errors.KAFKA_STORAGE_ERROR,
        Errors.FENCED_LEADER_EPOCH,
        Errors.UNKNOWN_LEADER_EPOCH,
        Errors.INVALID_UPDATE_VERSION,
        Errors.INELIGIBLE_REPLICA,
    ] == [6, 19, 20, 41, 55, 56, 74, 75, 95, 107]


def test_a_silent_follower_at_the_leader_end_leaves_the_isr_after_the_lag_time() -> None:
    """Push: heartbeats reach every follower, so one that stops answering on a quiet
    partition is out of sync although its log end equals the leader's."""
    state = leader_state()
    ack(state, "b", 100, now_ms=0)
    ack(state, "c", 100, now_ms=0)
    ack(state, "b", 100, now_ms=900)  # b answers a heartbeat; c is silent from now on
    state.tick(LAG_MS)
    assert state.pending_isr_change is None  # both heard within the lag time
    state.tick(LAG_MS + 1)
    assert state.pending_isr_change is not None and state.pending_isr_change.isr == ("a", "b")
