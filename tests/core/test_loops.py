"""raygroups' own event loops follow Ray's rule for its async actors (actors/core/loops.py)."""

import asyncio

import pytest
import uvloop

from actors.core import loops


async def _loop_kind() -> type:
    return type(asyncio.get_running_loop())


def test_loops_are_uvloops_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RAY_USE_UVLOOP", raising=False)
    assert loops.uses_uvloop()
    assert loops.run(_loop_kind()) is uvloop.Loop
    loop = loops.new_event_loop()
    try:
        assert isinstance(loop, uvloop.Loop)
    finally:
        loop.close()


@pytest.mark.parametrize("setting", ["0", "false", "False", "no"])
def test_ray_use_uvloop_off_gives_asyncios_loop(monkeypatch: pytest.MonkeyPatch, setting: str) -> None:
    # Ray's reading of the variable: only "1" and "true" (any case) keep uvloop.
    monkeypatch.setenv("RAY_USE_UVLOOP", setting)
    assert not loops.uses_uvloop()
    kind = loops.run(_loop_kind())
    assert issubclass(kind, asyncio.BaseEventLoop) and not issubclass(kind, uvloop.Loop)


@pytest.mark.parametrize("setting", ["1", "true", "TRUE"])
def test_ray_use_uvloop_on_gives_uvloop(monkeypatch: pytest.MonkeyPatch, setting: str) -> None:
    monkeypatch.setenv("RAY_USE_UVLOOP", setting)
    assert loops.run(_loop_kind()) is uvloop.Loop


def test_run_returns_the_coroutines_value_and_raises_its_error() -> None:
    async def answer() -> int:
        # A real suspension: the loop resumes it once the callback has run.
        future = asyncio.get_running_loop().create_future()
        asyncio.get_running_loop().call_soon(future.set_result, 42)
        return await future  # type: ignore[no-any-return]

    async def fail() -> None:
        raise ValueError("boom")

    assert loops.run(answer()) == 42
    with pytest.raises(ValueError, match="boom"):
        loops.run(fail())
