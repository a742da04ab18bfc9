"""A rolling restart's replacer named in the GCS KV (actors/core/attached.py) must be
one of raygroups' own functions: any process of the cluster can write that KV, and the
controller imports what it names."""

import pytest

from actors.core.attached import REPLACER, attach


@pytest.mark.parametrize("path", ["gateway.deploy:replace_gateway", "actors.x.y:f"])
def test_raygroups_functions_are_accepted(path: str) -> None:
    assert REPLACER.fullmatch(path)


@pytest.mark.parametrize(
    "path", ["os:system", "subprocess:run", "gatewayx.m:f", "gateway:f", "builtins:exec", ""]
)
def test_anything_else_is_refused_before_it_is_stored(path: str) -> None:
    assert not REPLACER.fullmatch(path)
    with pytest.raises(ValueError, match="module:function"):
        attach("g", "ns", replaced_by=path)
