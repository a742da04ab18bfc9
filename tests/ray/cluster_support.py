"""A simulated multi-node Ray cluster for the scenario scripts, which run in a
process of their own: the product's `actors.sim_cluster.simulated_cluster`
(the replicated demo uses it too), here always with a temporary data
directory, removed afterwards."""

from __future__ import annotations

from actors.sim_cluster import simulated_cluster

__all__ = ["simulated_cluster"]
