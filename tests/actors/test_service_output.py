"""Ray's messages to the driver go to stderr, never amid the program's output (actors.service)."""

from __future__ import annotations

import pytest
import ray._private.worker as ray_worker

from actors.service import raylet_messages_to_stderr


def test_raylet_messages_go_to_stderr_and_worker_logs_stay(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(ray_worker, "print_to_stdstream", ray_worker.print_to_stdstream)
    raylet_messages_to_stderr()
    raylet_messages_to_stderr()  # once only: wrapping twice would print twice

    ray_worker.print_to_stdstream(
        {"lines": ["WARNING: 8 PYTHON worker processes have been started"], "pid": "raylet", "is_err": False},
        ignore_prefix=False,
    )
    ray_worker.print_to_stdstream(
        {"lines": ["a worker's own line"], "pid": 1234, "ip": "127.0.0.1", "is_err": False},
        ignore_prefix=True,
    )
    out, err = capsys.readouterr()
    assert "worker processes have been started" in err
    assert err.count("worker processes have been started") == 1
    assert "worker processes" not in out
    assert "a worker's own line" in out
