"""The frame memory pool shared by a server's connections (gateway.pool): a release
grants and wakes the waiters that fit, in arrival order, and no one else; frames of
connections not logged in share a part of it."""

from __future__ import annotations

from gateway.pool import MemoryPool


class Waiter:
    def __init__(self) -> None:
        self.woken = 0

    def __call__(self) -> None:
        self.woken += 1


def test_a_release_wakes_the_waiters_that_fit_not_a_head_that_does_not_nor_everyone() -> None:
    pool = MemoryPool(100, 100)
    assert pool.reserve(90, True, Waiter())
    big, small, other_small, second_big = Waiter(), Waiter(), Waiter(), Waiter()
    assert not pool.reserve(60, True, big)
    assert not pool.reserve(20, True, small)
    assert not pool.reserve(20, True, other_small)
    assert not pool.reserve(60, True, second_big)
    assert pool.waiting == 4
    pool.release(50, True)  # 40 in use, 60 free: the head (60) fits and is granted first
    assert (big.woken, small.woken, other_small.woken, second_big.woken) == (1, 0, 0, 0)
    assert (pool.in_use, pool.waiting) == (100, 3)
    pool.release(60, True)  # 40 free: the head now (60) does not fit, the two smaller ones behind it do
    assert (small.woken, other_small.woken, second_big.woken) == (1, 1, 0)
    assert (pool.in_use, pool.waiting) == (80, 1)


def test_a_waiter_granted_holds_its_bytes_and_a_cancelled_one_is_never_woken() -> None:
    pool = MemoryPool(100, 100)
    assert pool.reserve(100, True, Waiter())
    gone, next_one = Waiter(), Waiter()
    assert not pool.reserve(30, True, gone)
    assert not pool.reserve(30, True, next_one)
    pool.cancel(gone)
    pool.release(100, True)
    assert (gone.woken, next_one.woken, pool.in_use, pool.waiting) == (0, 1, 30, 0)


def test_frames_before_a_login_share_their_part_of_the_pool_only() -> None:
    pool = MemoryPool(100, 50)
    assert pool.reserve(50, False, Waiter())
    stranger = Waiter()
    assert not pool.reserve(10, False, stranger)  # the strangers' half is full
    assert pool.reserve(50, True, Waiter())  # a logged-in client still has the other half
    pool.release(50, True)
    assert stranger.woken == 0  # room in the pool, none in the strangers' part
    pool.release(50, False)
    assert (stranger.woken, pool.in_use, pool.unauthenticated_in_use) == (1, 10, 10)
