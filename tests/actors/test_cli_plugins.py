"""The commands of the packages above actors/ plug into `raygroups` (actors/cli/main.py)."""

from __future__ import annotations

from actors.cli.main import build_command_line


def test_the_demo_gateway_and_analytics_commands_plug_in() -> None:
    parser, cli = build_command_line()
    assert {"demo", "gateway", "lag", "report", "stop"} <= set(cli.runners)
    assert cli.after_start, "the gateway deploys with `raygroups start --gateway-port`"
    start = parser.parse_args(["start", "--gateway-port", "9092"])
    assert start.gateway_port == 9092
    assert parser.parse_args(["demo", "--replicated"]).replicated
    assert parser.parse_args(["report", "--out", "/tmp/r"]).command == "report"
