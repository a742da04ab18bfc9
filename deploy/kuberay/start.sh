#!/bin/sh
# Start the raygroups service and its Kafka gateways on the RayCluster `raygroups`
# (deploy/kuberay/raycluster.yaml), from the operator's machine, through the head pod.
# Run it again after a restart: `raygroups start` attaches to a running service and a
# fresh one recovers from the logs on the pods' volumes.
set -eu
NAMESPACE="${NAMESPACE:-default}"
HEAD="$(kubectl -n "$NAMESPACE" get pods -l ray.io/cluster=raygroups,ray.io/node-type=head \
  -o jsonpath='{.items[0].metadata.name}')"
# 12 partitions x 3 copies over 3 nodes; a node leads at most 12 partitions, one listener
# port each, so 19092-19103 (the ports services.yaml declares) always suffices.
kubectl -n "$NAMESPACE" exec "$HEAD" -c ray-head -- \
  raygroups start --data-dir /var/lib/raygroups --partitions 12 \
  --replication-factor 3 --min-insync-replicas 2 --kafka-ports 19092-19103
# The gateways listen on the pods' IPs, which raygroups allows only with SASL or TLS:
# the users come from the Secret raygroups-gateway-users (RAYGROUPS_GATEWAY_SASL_USERS).
kubectl -n "$NAMESPACE" exec "$HEAD" -c ray-head -- raygroups gateway --all-nodes --port 9092
kubectl -n "$NAMESPACE" exec "$HEAD" -c ray-head -- raygroups gateway --list
