# The two commands of the README: `make run` (mount) and `make test` (the test suite).
.PHONY: run umount test setup lint bench clean

MOUNTPOINT ?= $(CURDIR)/mnt

setup:
	@scripts/bootstrap.sh

run: setup
	@scripts/run.sh "$(MOUNTPOINT)"

umount:
	@.venv/bin/sessionfs umount "$(MOUNTPOINT)"

test: setup
	.venv/bin/python -m pytest -q

lint: setup
	.venv/bin/ruff check core sessionfs tests bench contrib
	.venv/bin/mypy

bench: setup
	.venv/bin/python -m bench

clean:
	rm -rf .venv build *.egg-info .pytest_cache
