"""omp 18 kept running between turns: ``omp --mode rpc --resume FILE``, driven over its
JSON-lines protocol (one command per stdin line; responses and events on stdout), as an
editor integration or a long interactive session keeps it. Only what the tests use:
wait for ``ready``, send a command and wait for its response, wait for an event."""

from __future__ import annotations

import json
import queue
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from support.real_agents import RUN_TIMEOUT_S, OmpAgent

Json = dict[str, Any]


class OmpRpc:
    """One omp process in RPC mode on ``session``; `close` ends it (stdin closed, as a
    client that goes away) and returns its stderr."""

    def __init__(self, agent: OmpAgent, session: Path, cwd: Path) -> None:
        argv = [a for a in agent.command("", session) if a not in ("-p", "")]
        self.process = agent.spawn([*argv, "--mode", "rpc"], cwd, stdin=subprocess.PIPE)
        self._lines: queue.Queue[str | None] = queue.Queue()
        # A reader thread: a blocking readline could not honour a deadline.
        threading.Thread(target=self._read, daemon=True).start()
        self._ids = 0
        self.wait_for(lambda event: event.get("type") == "ready", "ready")

    @property
    def pid(self) -> int:
        return self.process.pid

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def wait_for(self, matches: Any, what: str, timeout: float = RUN_TIMEOUT_S) -> Json:
        """The first event (or response) ``matches`` accepts; fails after ``timeout``."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            assert left > 0, f"omp (rpc) sent no {what} within {timeout} s"
            try:
                line = self._lines.get(timeout=left)
            except queue.Empty:
                continue
            assert line is not None, f"omp (rpc) exited before {what}: {self.close()[-3000:]}"
            try:
                event = json.loads(line)
            except ValueError:
                continue  # not a protocol line
            if isinstance(event, dict) and matches(event):
                return event

    def request(self, command: str, **fields: Any) -> Json:
        """Send one command and return its (successful) response."""
        self._ids += 1
        ident = f"t{self._ids}"
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps({"id": ident, "type": command, **fields}) + "\n")
        self.process.stdin.flush()
        response = self.wait_for(
            lambda e: e.get("type") == "response" and e.get("id") == ident, f"{command} response"
        )
        assert response.get("success") is True, response
        return response

    def prompt(self, message: str) -> None:
        """One turn: the prompt, then wait until the agent's run ends."""
        self.request("prompt", message=message)
        self.wait_for(lambda e: e.get("type") == "agent_end", "agent_end")

    def close(self, timeout: float = 60) -> str:
        """End omp (stdin closed); its stderr. Killed if it does not exit in time."""
        if self.process.stdin is not None and not self.process.stdin.closed:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=30)
        assert self.process.stderr is not None
        return self.process.stderr.read()
