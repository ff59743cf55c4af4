# The two commands of the README: `make run` (mount) and `make test` (the test suite).
.PHONY: run umount test setup lint bench clean

MOUNTPOINT ?= $(CURDIR)/mnt

setup:
	@scripts/bootstrap.sh

run: setup
	@scripts/run.sh "$(MOUNTPOINT)"

umount:
	@.venv/bin/sessionfs umount "$(MOUNTPOINT)"

# Two worker processes (pytest-xdist), tests handed out as workers free up: most tests
# wait on a mount, an fsync or an agent, so two share a 2-core machine well.
test: setup
	.venv/bin/python -m pytest -q -n 2 --dist worksteal

lint: setup
	.venv/bin/ruff check core sessionfs tests bench contrib
	.venv/bin/ruff format --check core sessionfs tests bench contrib
	.venv/bin/mypy

bench: setup
	.venv/bin/python -m bench

clean:
	rm -rf .venv build *.egg-info .pytest_cache
