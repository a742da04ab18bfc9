"""The frame memory pool shared by a server's connections (gateway.pool): a release
grants and wakes the waiters that fit, in arrival order, and no one else; frames of
connections not logged in share a part of it."""

from __future__ import annotations

from gateway.pool import SMALL_FRAME_BYTES, MemoryPool


class Waiter:
    def __init__(self) -> None:
        self.woken = 0

    def __call__(self) -> None:
        self.woken += 1


def test_a_release_wakes_the_waiters_that_fit_smallest_first_and_no_one_else() -> None:
    pool = MemoryPool(100, 100)
    assert pool.reserve(90, True, Waiter())
    big, small, other_small, second_big = Waiter(), Waiter(), Waiter(), Waiter()
    assert not pool.reserve(60, True, big)
    assert not pool.reserve(20, True, small)
    assert not pool.reserve(20, True, other_small)
    assert not pool.reserve(60, True, second_big)
    assert pool.waiting == 4
    pool.release(30, True)  # 40 free: the head (60) does not fit; it holds back neither small one
    assert (big.woken, small.woken, other_small.woken, second_big.woken) == (0, 1, 1, 0)
    assert (pool.in_use, pool.waiting) == (100, 2)
    pool.release(60, True)  # 60 free: one big frame fits, the first to come; the other is not woken
    assert (big.woken, second_big.woken) == (1, 0)
    assert (pool.in_use, pool.waiting) == (100, 1)


def test_a_waiter_granted_holds_its_bytes_and_a_cancelled_one_is_never_woken() -> None:
    pool = MemoryPool(100, 100)
    assert pool.reserve(100, True, Waiter())
    gone, next_one = Waiter(), Waiter()
    assert not pool.reserve(30, True, gone)
    assert not pool.reserve(30, True, next_one)
    pool.cancel(gone)
    pool.release(100, True)
    assert (gone.woken, next_one.woken, pool.in_use, pool.waiting) == (0, 1, 30, 0)


def test_frames_before_a_login_share_their_part_of_the_pool_only_small_ones_aside() -> None:
    big = 4 * SMALL_FRAME_BYTES
    pool = MemoryPool(4 * big, 2 * big)
    assert pool.reserve(2 * big, False, Waiter())
    stranger = Waiter()
    assert not pool.reserve(big, False, stranger)  # the strangers' half is full
    # A login's small frames still fit, and a logged-in client has the other half.
    assert pool.reserve(SMALL_FRAME_BYTES, False, Waiter())
    assert pool.reserve(big, True, Waiter())
    pool.release(big, True)
    assert stranger.woken == 0  # room in the pool, none in the strangers' part
    pool.release(2 * big, False)
    assert (stranger.woken, pool.unauthenticated_in_use) == (1, big)
    pool.release(SMALL_FRAME_BYTES, False)
    assert (pool.in_use, pool.unauthenticated_in_use) == (big, big)
