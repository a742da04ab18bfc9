"""Whether a listener speaks plaintext on loopback: decided without the gateway's code.

A leader's Kafka listener binds its port when it leads and loads the
gateway's code (kio and the handlers, some 3 MiB) only when a Kafka client
connects (`gateway.direct.listener`), but only a plaintext one can: with
SASL/PLAIN (a users file, or `USERS_ENV`) or TLS it listens on the node's
address, reads its users and certificates at start and reports them wrong
at once, so it loads everything at start (`gateway.security` reads these
settings; this leaf only tells the two apart).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from actors.core.settings import sasl_or_tls


def is_plaintext(
    sasl_users_file: str | None, tls_cert: str | None, environ: Mapping[str, str] | None = None
) -> bool:
    """True when neither SASL/PLAIN nor TLS is configured (`gateway.security.SecurityConfig`'s rule)."""
    return not sasl_or_tls(sasl_users_file, tls_cert, os.environ if environ is None else environ)
