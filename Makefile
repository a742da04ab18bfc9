# The two commands of the README are `make demo` and `make test`.
# Extra arguments: make test ARGS="-k join -x", make demo ARGS="..."
ARGS ?=

.PHONY: demo test lint bench setup

demo:
	bash scripts/demo.sh $(ARGS)

test:
	bash scripts/test.sh $(ARGS)

lint:
	bash scripts/lint.sh

bench:
	bash scripts/bench.sh $(ARGS)

setup:
	bash scripts/setup.sh
