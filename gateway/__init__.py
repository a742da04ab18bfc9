"""The Kafka wire-protocol gateway: Kafka clients and tools as members and readers of raygroups' groups.

An asyncio TCP server (`gateway.server`) speaking Kafka's binary protocol
through kio (`gateway.codec`), with SASL/PLAIN and TLS (`gateway.security`)
and, with either, Kafka's ACLs on every request (`gateway.authorize`),
one per Ray node when deployed with the service (`gateway.deploy`). Each
Kafka request becomes the same `actors.Client` call a Python caller makes
(`gateway.apis` and `gateway.handlers`); the gateway decides no group
semantics. Imports point one way: gateway -> actors -> coordinator.

kio is imported here first, without hypothesis: kio imports hypothesis
wherever it is installed (`kio.static._phantom`), to give its types test
strategies the gateway never uses, which costs each process that listens
(every partition leader, `actors.partition.kafka_plug`) 8 MiB and 0.1 s
(docs/capacity.md). A process that imported hypothesis before (a test run)
keeps kio's strategies.
"""

import sys


def _import_kio_without_hypothesis() -> None:
    if "kio" in sys.modules or "hypothesis" in sys.modules:
        return
    # None in sys.modules makes `import hypothesis.strategies` raise ImportError, which
    # kio takes as "not installed"; removed at once, so a later import finds hypothesis.
    sys.modules["hypothesis"] = None  # type: ignore[assignment]
    try:
        import kio.static._phantom  # noqa: F401
    finally:
        del sys.modules["hypothesis"]


_import_kio_without_hypothesis()
