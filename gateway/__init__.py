"""The Kafka wire-protocol gateway: Kafka clients and tools as members and readers of raygroups' groups.

An asyncio TCP server (`gateway.server`) speaking Kafka's binary protocol
through kio (`gateway.codec`), with SASL/PLAIN and TLS (`gateway.security`)
and, with either, Kafka's ACLs on every request (`gateway.authorize`),
one per Ray node when deployed with the service (`gateway.deploy`). Each
Kafka request becomes the same `actors.Client` call a Python caller makes
(`gateway.apis` and `gateway.handlers`); the gateway decides no group
semantics. Imports point one way: gateway -> actors -> coordinator.
"""
