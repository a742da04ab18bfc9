"""The demos: `raygroups demo` (`embedded.py`: groups on a local Ray cluster, a
killed member and partition, recovery, Spark analytics) and `--replicated`
(`replicated.py`: a simulated 4-node cluster that loses a leader's node and
disk), the simulated multi-node cluster both the replicated demo and the
benchmarks use (`sim_cluster.py`), and the `demo` command's plugin
(`command.py`).

The top of the Ray layer: it may import any subpackage of `actors`,
the CLI's tables included; nothing in `actors` imports it.
"""
