# The two commands of the README are `make demo` and `make test`.
# Extra arguments: make test ARGS="-k join -x", make demo ARGS="..."
# `make demo-replicated` is `make demo ARGS=--replicated`: a simulated 4-node
# cluster loses a leader's node and disk while consumers commit.
ARGS ?=

.PHONY: demo demo-replicated test lint bench setup

demo:
	bash scripts/demo.sh $(ARGS)

demo-replicated:
	bash scripts/demo.sh --replicated $(ARGS)

test:
	bash scripts/test.sh $(ARGS)

lint:
	bash scripts/lint.sh

bench:
	bash scripts/bench.sh $(ARGS)

# make bench-replication ARGS=--quick
bench-replication:
	RAY_AUTH_MODE=disabled .venv/bin/python -m bench.replication $(ARGS)

setup:
	bash scripts/setup.sh
