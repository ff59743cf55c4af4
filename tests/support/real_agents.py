"""The real upstream agents as test clients: install once, configure offline, run.

* **pi** 0.73 (npm ``@mariozechner/pi-coding-agent``, runs on Node) is installed with
  npm into ``$SESSIONFS_PI_CACHE`` (else ``<repo>/.cache/npm-pi``).
* **omp** 18 (oh-my-pi, npm ``@oh-my-pi/pi-coding-agent``) runs on Bun: Bun comes from
  npm (``@oven/bun-linux-x64``) into ``$SESSIONFS_OMP_CACHE`` (else
  ``<repo>/.cache/omp``), and that Bun installs omp into ``<cache>/omp`` from npm's
  configured registry. Versions are pinned so a new upstream release cannot change
  what the interop tests mean under our feet.
* **Codex** 0.171 (npm ``@openai/codex``; npm brings the native binary as
  ``@openai/codex-linux-x64``, the package's Node launcher runs it) into
  ``$SESSIONFS_CODEX_CACHE`` (else ``<repo>/.cache/npm-codex``). It talks to the
  Responses API: `fake_responses_server`.
* **Claude Code** 2.1 (npm ``@anthropic-ai/claude-code``; npm brings its native binary
  through the platform package and its install script puts it at ``bin/claude.exe``)
  is installed with npm into ``$SESSIONFS_CLAUDE_CACHE`` (else
  ``<repo>/.cache/claude-code``). It talks the Anthropic Messages API to
  `fake_anthropic_server` (``ANTHROPIC_BASE_URL``).
* **GitHub Copilot CLI** 1.0.102 (npm ``@github/copilot``) and **opencode** 1.18.33
  (npm ``opencode-ai``), both native binaries, into ``$SESSIONFS_NEWER_AGENTS_CACHE``
  (else ``<repo>/.cache/newer-agents``). Both talk chat completions:
  `fake_model_server` (``ToolCall`` scripts a tool call).
* **Gemini CLI** 0.61 (npm ``@google/gemini-cli``) and **Qwen Code** 0.24 (npm
  ``@qwen-code/qwen-code``), Node bundles installed like pi into
  ``$SESSIONFS_GEMINI_CACHE`` / ``$SESSIONFS_QWEN_CACHE`` (else ``<repo>/.cache/npm-gemini``,
  ``npm-qwen``); Gemini talks to `fake_gemini_server`, Qwen to `fake_model_server`.

Each agent run gets its own ``HOME`` (nothing of the real user's config, keys or
sessions leaks in, and nothing the agent writes leaks out), a clean environment (no
proxy or API-key variables), and an agent dir whose only model provider is the fake
model server (`fake_model_server`), with update checks, telemetry and the probing of
local model servers off.

This module imports nothing outside the standard library, so CI can run it before the
test venv exists: ``python3 tests/support/real_agents.py install`` installs every agent
into the cache dirs the tests use, and exits non-zero on any failure (a registry
failure fails CI instead of turning into skipped tests).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Self

REPO = Path(__file__).resolve().parents[2]

PI_PACKAGE = "@mariozechner/pi-coding-agent"
PI_VERSION = "0.73.1"
PI_CACHE_ENV = "SESSIONFS_PI_CACHE"

BUN_PACKAGE = "@oven/bun-linux-x64"
BUN_VERSION = "1.4.4"
OMP_PACKAGE = "@oh-my-pi/pi-coding-agent"
#: 18.2.3 resolves from npm; 18.3's dependencies do not.
OMP_VERSION = "18.2.3"
OMP_CACHE_ENV = "SESSIONFS_OMP_CACHE"

CODEX_PACKAGE = "@openai/codex"
#: npm brings the native binary as the optional dependency ``@openai/codex-linux-x64``.
CODEX_VERSION = "0.171.0"
CODEX_CACHE_ENV = "SESSIONFS_CODEX_CACHE"
#: The env var Codex reads the fake provider's API key from (``env_key``).
CODEX_KEY_ENV = "FAKE_API_KEY"
CLAUDE_PACKAGE = "@anthropic-ai/claude-code"
CLAUDE_VERSION = "2.1.332"
CLAUDE_CACHE_ENV = "SESSIONFS_CLAUDE_CACHE"
#: What Claude Code may do unasked in print mode. As root ``--dangerously-skip-
#: permissions`` is refused; listing the tools is what works for every user.
CLAUDE_TOOLS = "Read,Bash,Agent,Write,Edit"

#: GitHub Copilot CLI and opencode (native binaries from npm), run offline against
#: `fake_model_server` (chat completions); each into its own cache dir.
COPILOT_PACKAGE = "@github/copilot"
COPILOT_VERSION = "1.0.102"
OPENCODE_PACKAGE = "opencode-ai"
OPENCODE_VERSION = "1.18.33"
NEWER_AGENTS_CACHE_ENV = "SESSIONFS_NEWER_AGENTS_CACHE"
#: Gemini CLI (npm, a Node bundle), installed like pi into ``$SESSIONFS_GEMINI_CACHE``
#: (else ``<repo>/.cache/npm-gemini``).
GEMINI_PACKAGE = "@google/gemini-cli"
GEMINI_VERSION = "0.61.0"
GEMINI_CACHE_ENV = "SESSIONFS_GEMINI_CACHE"

#: Qwen Code (npm, a Node bundle; says it wants Node 22, runs on Node 20 in print mode),
#: into ``$SESSIONFS_QWEN_CACHE`` (else ``<repo>/.cache/npm-qwen``).
QWEN_PACKAGE = "@qwen-code/qwen-code"
QWEN_VERSION = "0.24.4"
QWEN_CACHE_ENV = "SESSIONFS_QWEN_CACHE"

INSTALL_TIMEOUT_S = 600
#: One agent turn against the fake server takes ~5 s (mostly start-up); generous for
#: a loaded 2-core machine, short enough that a hang fails the test.
RUN_TIMEOUT_S = 180
FAKE_PROVIDER = "fake"
FAKE_API_KEY = "fake-key"

#: npm/bun output that means "the registry could not be reached", not a broken install.
_NETWORK_ERRORS = (
    "ENOTFOUND",
    "EAI_AGAIN",
    "ECONNREFUSED",
    "ECONNRESET",
    "ETIMEDOUT",
    "ConnectionRefused",
    "ConnectionClosed",
    "network",
)


class AgentUnavailable(RuntimeError):
    """The agent cannot be installed on this machine (no npm, or no registry)."""


class InstallFailed(RuntimeError):
    """npm or bun ran and failed for another reason: a real error."""


# --------------------------------------------------------------------------- installing


def pi_cache_dir() -> Path:
    configured = os.environ.get(PI_CACHE_ENV)
    return Path(configured) if configured else REPO / ".cache" / "npm-pi"


def omp_cache_dir() -> Path:
    configured = os.environ.get(OMP_CACHE_ENV)
    return Path(configured) if configured else REPO / ".cache" / "omp"


def codex_cache_dir() -> Path:
    configured = os.environ.get(CODEX_CACHE_ENV)
    return Path(configured) if configured else REPO / ".cache" / "npm-codex"


def claude_cache_dir() -> Path:
    configured = os.environ.get(CLAUDE_CACHE_ENV)
    return Path(configured) if configured else REPO / ".cache" / "claude-code"


def _package_dir(root: Path, package: str) -> Path:
    return root / "node_modules" / package


def _installed_version(root: Path, package: str) -> str | None:
    try:
        manifest = json.loads((_package_dir(root, package) / "package.json").read_bytes())
    except (OSError, ValueError):
        return None
    return str(manifest.get("version"))


def _ensure_manifest(root: Path, name: str) -> None:
    root.mkdir(parents=True, exist_ok=True)
    manifest = root / "package.json"
    if not manifest.exists():
        manifest.write_text(json.dumps({"name": name, "private": True}))


def _install(command: list[str], cwd: Path, what: str, env: dict[str, str] | None = None) -> None:
    try:
        done = subprocess.run(
            command,
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=INSTALL_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired as error:
        raise AgentUnavailable(f"installing {what} took over {INSTALL_TIMEOUT_S} s") from error
    if done.returncode == 0:
        return
    output = done.stdout + done.stderr
    if any(marker in output for marker in _NETWORK_ERRORS):
        raise AgentUnavailable(f"the registry could not be reached for {what}: {output[-300:]}")
    raise InstallFailed(f"{' '.join(command)} failed:\n{output[-2000:]}")


def _require_npm() -> str:
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        raise AgentUnavailable("node/npm are not installed (CI installs them)")
    return npm


def _npm_install(root: Path, package: str, version: str, manifest_name: str) -> None:
    if _installed_version(root, package) == version:
        return
    npm = _require_npm()
    _ensure_manifest(root, manifest_name)
    _install(
        [npm, "install", "--no-audit", "--no-fund", f"{package}@{version}"],
        root,
        f"{package}@{version}",
    )
    if _installed_version(root, package) != version:
        raise InstallFailed(f"npm reported success but {package}@{version} is not in {root}")


@contextlib.contextmanager
def _install_lock(cache: Path) -> Iterator[None]:
    """One installer per cache dir at a time: `make test` runs two pytest workers, and
    both may find the agent missing at once."""
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / ".install.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def install_pi(cache: Path | None = None) -> Path:
    """The pinned pi in ``cache`` (installed unless it is already there); the cache."""
    cache = cache or pi_cache_dir()
    with _install_lock(cache):
        _npm_install(cache, PI_PACKAGE, PI_VERSION, "sessionfs-pi-interop")
    if shutil.which("node") is None:  # installed earlier, but nothing here can run it
        raise AgentUnavailable("node is not installed: pi runs on Node 20 (CI installs it)")
    return cache


def install_codex(cache: Path | None = None) -> Path:
    """The pinned Codex CLI in ``cache`` (installed unless it is already there); the
    cache. Its launcher runs on Node; the agent itself is the native binary npm
    installs beside it."""
    cache = cache or codex_cache_dir()
    with _install_lock(cache):
        _npm_install(cache, CODEX_PACKAGE, CODEX_VERSION, "sessionfs-codex-interop")
    if shutil.which("node") is None:
        raise AgentUnavailable(
            "node is not installed: the codex launcher runs on Node (CI installs it)"
        )
    return cache


def install_claude(cache: Path | None = None) -> Path:
    """The pinned Claude Code in ``cache`` (installed unless it is already there); the
    cache. The native binary must answer ``--version`` with the pinned version: the
    package's install script replaces a placeholder with it, and a placeholder left
    behind (the platform package missing) is a failed install, not a skip."""
    cache = cache or claude_cache_dir()
    with _install_lock(cache):
        _npm_install(cache, CLAUDE_PACKAGE, CLAUDE_VERSION, "sessionfs-claude-code")
        binary = claude_executable(cache)
        try:
            done = subprocess.run(
                [str(binary), "--version"],
                env={"PATH": os.environ.get("PATH", ""), "HOME": str(cache)},
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
            )
        except OSError as error:
            raise InstallFailed(f"{binary} does not run: {error}") from error
        if not done.stdout.startswith(CLAUDE_VERSION):
            raise InstallFailed(
                f"{binary} --version said {done.stdout.strip()!r} {done.stderr[-500:]!r}, "
                f"not {CLAUDE_VERSION} (no native binary for this platform?)"
            )
    return cache


def claude_executable(claude_cache: Path) -> Path:
    return _package_dir(claude_cache, CLAUDE_PACKAGE) / "bin" / "claude.exe"


def newer_agents_cache_dir() -> Path:
    configured = os.environ.get(NEWER_AGENTS_CACHE_ENV)
    return Path(configured) if configured else REPO / ".cache" / "newer-agents"


def install_copilot(cache: Path | None = None) -> Path:
    """The pinned GitHub Copilot CLI in ``cache`` (installed unless it is there)."""
    cache = cache or newer_agents_cache_dir()
    with _install_lock(cache):
        _npm_install(cache, COPILOT_PACKAGE, COPILOT_VERSION, "sessionfs-newer-agents")
    return cache


def install_opencode(cache: Path | None = None) -> Path:
    """The pinned opencode in ``cache`` (installed unless it is there)."""
    cache = cache or newer_agents_cache_dir()
    with _install_lock(cache):
        _npm_install(cache, OPENCODE_PACKAGE, OPENCODE_VERSION, "sessionfs-newer-agents")
    return cache


def _npm_registry() -> str:
    done = subprocess.run(
        [_require_npm(), "config", "get", "registry"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    registry = done.stdout.strip()
    return registry if done.returncode == 0 and registry else "https://registry.npmjs.org/"


def install_omp(cache: Path | None = None) -> Path:
    """Bun from npm, then omp with that Bun, both pinned, into ``cache``; the cache.

    omp goes into its own ``<cache>/omp`` project so npm (which owns ``<cache>``'s
    node_modules) and bun never rewrite each other's trees. Bun is pointed at npm's
    configured registry (a mirror configured for npm is honoured) and keeps its
    download cache inside ``cache``.
    """
    cache = cache or omp_cache_dir()
    with _install_lock(cache):
        _install_omp(cache)
    return cache


def _install_omp(cache: Path) -> None:
    _npm_install(cache, BUN_PACKAGE, BUN_VERSION, "sessionfs-bun")
    project = cache / "omp"
    if _installed_version(project, OMP_PACKAGE) == OMP_VERSION:
        return
    _ensure_manifest(project, "sessionfs-omp-interop")
    bun = bun_executable(cache)
    env = {
        **os.environ,
        "BUN_CONFIG_REGISTRY": _npm_registry(),
        "BUN_INSTALL_CACHE_DIR": str(cache / "bun-install-cache"),
    }
    _install(
        [str(bun), "add", "--exact", f"{OMP_PACKAGE}@{OMP_VERSION}"],
        project,
        f"{OMP_PACKAGE}@{OMP_VERSION}",
        env,
    )
    if _installed_version(project, OMP_PACKAGE) != OMP_VERSION:
        raise InstallFailed(
            f"bun reported success but {OMP_PACKAGE}@{OMP_VERSION} is not in {project}"
        )


def bun_executable(omp_cache: Path) -> Path:
    return _package_dir(omp_cache, BUN_PACKAGE) / "bin" / "bun"


def omp_package_dir(omp_cache: Path) -> Path:
    """The installed omp package (its ``src/`` is importable with Bun)."""
    return _package_dir(omp_cache / "omp", OMP_PACKAGE)


def pi_package_dir(pi_cache: Path) -> Path:
    return _package_dir(pi_cache, PI_PACKAGE)


def install_node_agent(package: str, version: str, cache: Path, manifest_name: str) -> Path:
    """The pinned npm ``package`` (a CLI that runs on Node) in ``cache``, installed
    unless it is already there; the cache."""
    with _install_lock(cache):
        _npm_install(cache, package, version, manifest_name)
    if shutil.which("node") is None:  # installed earlier, but nothing here can run it
        raise AgentUnavailable(f"node is not installed: {package} runs on Node (CI installs it)")
    return cache


def _cache_dir(variable: str, default: str) -> Path:
    configured = os.environ.get(variable)
    return Path(configured) if configured else REPO / ".cache" / default


def install_gemini(cache: Path | None = None) -> Path:
    """The pinned Gemini CLI in ``cache`` (``$SESSIONFS_GEMINI_CACHE``); the cache."""
    cache = cache or _cache_dir(GEMINI_CACHE_ENV, "npm-gemini")
    return install_node_agent(GEMINI_PACKAGE, GEMINI_VERSION, cache, "sessionfs-gemini-interop")


# --------------------------------------------------------------------------- running

#: Variables an agent run inherits; everything else (API keys, proxies, PI_*, XDG_*,
#: the user's HOME) is dropped so the run sees only what the test set up.
_INHERITED = ("PATH", "LANG", "LC_ALL", "TZ", "TMPDIR")


@dataclass
class RealAgent:
    """One agent installation configured against a fake model server.

    ``home`` is the run's ``$HOME``; ``agent_dir`` the agent dir it uses (by default
    the agent's own default under ``home``, so discovery is exercised as a user has
    it). `run` waits for the agent; `start` returns the process (e.g. to act while
    the fake model holds its reply).
    """

    home: Path
    agent_dir: Path
    model_url: str
    model_id: str
    #: The cache dir the agent is installed in (`install_pi` / `install_omp`).
    install: Path
    extra_env: dict[str, str] = field(default_factory=dict)

    #: The agent's command name, which is also its dot dir (``~/.pi``, ``~/.omp``).
    name = "agent"

    # Subclasses: the argv of one print-mode turn, and their offline configuration.
    def command(self, prompt: str, session: Path | None, options: Sequence[str] = ()) -> list[str]:
        raise NotImplementedError

    def write_config(self) -> None:
        raise NotImplementedError

    @classmethod
    def at_home(cls, home: Path, model_url: str, model_id: str, install: Path) -> Self:
        """The agent with ``home`` as its HOME and its default agent dir there,
        configured for model ``model_id`` of the server at ``model_url``."""
        agent = cls(home, default_agent_dir(home, cls.name), model_url, model_id, install)
        return agent.configure()

    def configure(self) -> Self:
        """Write the agent dir's model and settings files; the agent, ready to run."""
        self.write_config()
        return self

    def agent_env(self) -> dict[str, str]:
        return {}

    def write_models(self, name: str) -> None:
        """``<agent dir>/<name>``: one provider, the fake server, with one model. pi
        and omp read the same shape (omp from YAML, of which JSON is a subset)."""
        self.agent_dir.mkdir(parents=True, exist_ok=True)
        provider = {
            "baseUrl": self.model_url,
            "api": "openai-completions",
            "apiKey": FAKE_API_KEY,
            "models": [{"id": self.model_id}],
        }
        models = {"providers": {FAKE_PROVIDER: provider}}
        (self.agent_dir / name).write_text(json.dumps(models, indent=2))

    def env(self) -> dict[str, str]:
        env = {key: os.environ[key] for key in _INHERITED if key in os.environ}
        env.setdefault("LANG", "C.UTF-8")
        env.update(
            HOME=str(self.home),
            # The fake server is on 127.0.0.1: never through a proxy.
            NO_PROXY="127.0.0.1,localhost",
            no_proxy="127.0.0.1,localhost",
            NO_COLOR="1",
            TERM="dumb",
            CI="1",
        )
        env.update(self.agent_env())
        env.update(self.extra_env)
        return env

    def start(
        self,
        prompt: str,
        session: Path | None = None,
        cwd: Path | None = None,
        options: Sequence[str] = (),
    ) -> subprocess.Popen[str]:
        """Start one print-mode turn: ``session`` continues that file (from its last
        entry); without it the agent creates a new session for ``cwd`` (or does what
        ``options``, more command-line options, say)."""
        return self.spawn(self.command(prompt, session, options), cwd or self.home)

    def spawn(
        self, argv: list[str], cwd: Path, stdin: int = subprocess.DEVNULL
    ) -> subprocess.Popen[str]:
        """``argv`` in this agent's environment, in ``cwd`` (made if missing), its
        output captured as text; ``stdin`` a pipe for an agent driven over it."""
        cwd.mkdir(parents=True, exist_ok=True)
        return subprocess.Popen(
            argv,
            cwd=cwd,
            env=self.env(),
            stdin=stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def run(
        self,
        prompt: str,
        session: Path | None = None,
        cwd: Path | None = None,
        options: Sequence[str] = (),
        timeout: float = RUN_TIMEOUT_S,
    ) -> AgentResult:
        return finish(self.start(prompt, session, cwd, options), timeout)

    def sessions(self) -> list[Path]:
        """Every session file under the agent dir, oldest first by name."""
        return sorted((self.agent_dir / "sessions").glob("*/*.jsonl"))


@dataclass(frozen=True)
class AgentResult:
    returncode: int
    stdout: str
    stderr: str

    def check(self) -> AgentResult:
        if self.returncode != 0:
            raise AssertionError(
                f"agent exited {self.returncode}\nstdout:\n{self.stdout[-2000:]}\n"
                f"stderr:\n{self.stderr[-4000:]}"
            )
        return self


def kill(process: subprocess.Popen[str]) -> None:
    """End a started run now (a test that failed while the agent was running)."""
    if process.poll() is None:
        process.kill()
    process.communicate(timeout=30)


def finish(process: subprocess.Popen[str], timeout: float = RUN_TIMEOUT_S) -> AgentResult:
    """Wait for a started run; kill it (and fail) when it takes longer than ``timeout``."""
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        stdout, stderr = process.communicate(timeout=30)
        raise AssertionError(
            f"agent run took over {timeout} s; stderr:\n{stderr[-4000:]}"
        ) from None
    return AgentResult(process.returncode, stdout, stderr)


@dataclass
class PiAgent(RealAgent):
    """pi 0.73: ``pi -p --session FILE "prompt"``; models in ``<agent dir>/models.json``."""

    name = "pi"

    def write_config(self) -> None:
        self.write_models("models.json")

    def agent_env(self) -> dict[str, str]:
        return {
            "PI_CODING_AGENT_DIR": str(self.agent_dir),
            # No version check, no package-manager network, no install telemetry.
            "PI_OFFLINE": "1",
            "PI_SKIP_VERSION_CHECK": "1",
            "PI_TELEMETRY": "0",
        }

    def command(self, prompt: str, session: Path | None, options: Sequence[str] = ()) -> list[str]:
        cli = pi_package_dir(self.install) / "dist" / "cli.js"
        argv = ["node", str(cli), "-p", "--provider", FAKE_PROVIDER, "--model", self.model_id]
        if session is not None:
            argv += ["--session", str(session)]
        return [*argv, *options, prompt]


@dataclass
class OmpAgent(RealAgent):
    """omp 18: ``omp -p --resume FILE "prompt"``; models in ``<agent dir>/models.yml``,
    settings in ``<agent dir>/config.yml``."""

    name = "omp"

    def write_config(self) -> None:
        self.write_models("models.yml")  # JSON is YAML: no YAML writer, nothing to quote
        settings = {
            # No startup update check and no plugin marketplace check (both network).
            "startup": {"checkUpdate": False},
            "marketplace": {"autoUpdate": "off"},
            # omp probes local model servers on their default ports at start-up: on a
            # machine where one of those ports is taken that would be a second,
            # unscripted model; only the fake provider is wanted.
            "disabledProviders": ["ollama", "llama.cpp", "lm-studio"],
        }
        (self.agent_dir / "config.yml").write_text(json.dumps(settings, indent=2))

    def agent_env(self) -> dict[str, str]:
        bun_dir = str(bun_executable(self.install).parent)
        env = {"PATH": os.pathsep.join((bun_dir, os.environ.get("PATH", "")))}
        if self.agent_dir != default_agent_dir(self.home, "omp"):
            env["PI_CODING_AGENT_DIR"] = str(self.agent_dir)
        return env

    def command(self, prompt: str, session: Path | None, options: Sequence[str] = ()) -> list[str]:
        cli = omp_package_dir(self.install) / "dist" / "cli.js"
        argv = [str(bun_executable(self.install)), str(cli), "-p"]
        argv += ["--model", f"{FAKE_PROVIDER}/{self.model_id}"]
        if session is not None:
            argv += ["--resume", str(session)]
        return [*argv, *options, prompt]

    def bun_script(self, script: Path, *args: str, timeout: float = RUN_TIMEOUT_S) -> AgentResult:
        """Run a Bun script (one that imports omp's own modules through the
        ``OMP_PACKAGE_DIR`` it is given) in this agent's environment."""
        env = {**self.env(), "OMP_PACKAGE_DIR": str(omp_package_dir(self.install))}
        process = subprocess.Popen(
            [str(bun_executable(self.install)), str(script), *args],
            cwd=self.home,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        return finish(process, timeout)


@dataclass
class CodexAgent(RealAgent):
    """Codex CLI 0.171: ``codex exec PROMPT`` (a new session), ``codex exec resume
    ID|--last PROMPT``, ``codex exec fork ID PROMPT``; the agent dir is ``CODEX_HOME``
    (``config.toml``, ``sessions/YYYY/MM/DD/rollout-*.jsonl``, ``state_5.sqlite``).

    ``HOME`` is the test home too: Codex writes ``~/.codex/tmp/`` under the account's
    home whatever ``CODEX_HOME`` says. Every run reads nothing from stdin (``exec``
    would wait for it otherwise) and asks for no approval (nobody is there to give it).
    """

    name = "codex"
    #: ``model_auto_compact_token_limit`` in config.toml (``None``: Codex's default).
    auto_compact_tokens: int | None = None

    @classmethod
    def at_home(cls, home: Path, model_url: str, model_id: str, install: Path) -> Self:
        agent = cls(home, home / ".codex", model_url, model_id, install)
        return agent.configure()

    def write_config(self) -> None:
        self.agent_dir.mkdir(parents=True, exist_ok=True)
        lines = [
            f"model = {json.dumps(self.model_id)}",
            f"model_provider = {json.dumps(FAKE_PROVIDER)}",
            "check_for_update_on_startup = false",
        ]
        if self.auto_compact_tokens is not None:
            lines.append(f"model_auto_compact_token_limit = {self.auto_compact_tokens}")
        lines += [
            "",
            f"[model_providers.{FAKE_PROVIDER}]",
            'name = "fake"',
            f"base_url = {json.dumps(self.model_url)}",
            'wire_api = "responses"',
            f"env_key = {json.dumps(CODEX_KEY_ENV)}",
            # One request per turn: a retried request would be a second, unscripted one.
            "request_max_retries = 0",
            "stream_max_retries = 0",
            "",
            "[analytics]",
            "enabled = false",
            "",
            "[feedback]",
            "enabled = false",
        ]
        (self.agent_dir / "config.toml").write_text("\n".join(lines) + "\n")

    def agent_env(self) -> dict[str, str]:
        return {"CODEX_HOME": str(self.agent_dir), CODEX_KEY_ENV: FAKE_API_KEY}

    def _exec(self, *args: str) -> list[str]:
        cli = _package_dir(self.install, CODEX_PACKAGE) / "bin" / "codex.js"
        flags = ["--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox"]
        return ["node", str(cli), "exec", *args[:-1], *flags, args[-1]]

    def command(self, prompt: str, session: Path | None, options: Sequence[str] = ()) -> list[str]:
        """A new session, or (``session``: a rollout file) that thread resumed."""
        if session is None:
            return self._exec(*options, prompt)
        return self._exec("resume", *options, rollout_thread_id(session), prompt)

    def resume(self, thread_id: str | None, prompt: str, cwd: Path | None = None) -> AgentResult:
        """``codex exec resume ID PROMPT`` (``thread_id`` ``None``: ``--last``)."""
        target = "--last" if thread_id is None else thread_id
        return finish(self.spawn(self._exec("resume", target, prompt), cwd or self.home))

    def fork(self, thread_id: str, prompt: str, cwd: Path | None = None) -> AgentResult:
        """``codex exec fork ID PROMPT``: a new rollout continuing ``thread_id``."""
        return finish(self.spawn(self._exec("fork", thread_id, prompt), cwd or self.home))

    def sessions(self) -> list[Path]:
        """Every rollout under ``sessions/YYYY/MM/DD/``, oldest first by name."""
        return sorted((self.agent_dir / "sessions").glob("*/*/*/rollout-*.jsonl"))


def rollout_thread_id(rollout: Path) -> str:
    """The thread id a rollout's first line (``session_meta``) names."""
    with open(rollout, "rb") as file:
        first = json.loads(file.readline())
    return str(first["payload"]["id"])


class ClaudeAgent(RealAgent):
    """Claude Code 2.1 in print mode: ``claude -p PROMPT`` (``--resume ID`` continues
    a session, more options as given), its sessions under ``<home>/.claude``.

    ``model_url`` is the fake Anthropic server's root (``ANTHROPIC_BASE_URL``);
    ``model_id``, when not empty, is passed as ``--model`` (else the CLI's default).
    Output is ``--output-format json``: `ClaudeTurn` has the session id and result.
    """

    name = "claude"

    @classmethod
    def at_home(cls, home: Path, model_url: str, model_id: str, install: Path) -> Self:
        return cls(home, home / ".claude", model_url, model_id, install).configure()

    def write_config(self) -> None:
        # Nothing to configure: the environment points Claude Code at the fake
        # server. Its temp dir must exist (it is inside the test's HOME).
        self.temp_dir().mkdir(parents=True, exist_ok=True)

    def temp_dir(self) -> Path:
        return self.home / "tmp"

    def agent_env(self) -> dict[str, str]:
        temp = str(self.temp_dir())
        return {
            "ANTHROPIC_BASE_URL": self.model_url,
            "ANTHROPIC_API_KEY": "x",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_ERROR_REPORTING": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            # Temp files (shell snapshots, sockets) stay in the test dir.
            "TMPDIR": temp,
            "CLAUDE_CODE_TMPDIR": temp,
        }

    def command(self, prompt: str, session: Path | None, options: Sequence[str] = ()) -> list[str]:
        """``session``: a session file (its stem is the id) to resume."""
        resume = ["--resume", session.stem] if session is not None else []
        return self._argv(["-p", prompt, "--output-format", "json"], [*resume, *options])

    def _argv(self, mode: list[str], options: Sequence[str]) -> list[str]:
        argv = [str(claude_executable(self.install)), *mode, "--allowedTools", CLAUDE_TOOLS]
        if self.model_id:
            argv += ["--model", self.model_id]
        return [*argv, *options]

    def turn(
        self,
        prompt: str,
        cwd: Path,
        resume: str | None = None,
        options: Sequence[str] = (),
        timeout: float = RUN_TIMEOUT_S,
    ) -> ClaudeTurn:
        """One print-mode turn in ``cwd`` (``resume``: a session id to continue),
        checked to have exited 0; its JSON result."""
        more = ["--resume", resume, *options] if resume is not None else list(options)
        result = self.run(prompt, cwd=cwd, options=more, timeout=timeout).check()
        return ClaudeTurn.parse(result)

    def turn_messages(
        self,
        messages: Sequence[dict[str, object]],
        cwd: Path,
        resume: str | None = None,
        timeout: float = RUN_TIMEOUT_S,
    ) -> ClaudeTurn:
        """One print-mode turn whose prompt is user messages in the Messages API shape
        (``{"role": "user", "content": [blocks]}``: an image block, say), given as
        ``--input-format stream-json`` on stdin; its result, checked."""
        mode = ["-p", "--input-format", "stream-json", "--output-format", "stream-json"]
        options = ["--verbose", *(["--resume", resume] if resume is not None else [])]
        process = self.spawn(self._argv(mode, options), cwd, stdin=subprocess.PIPE)
        lines = "".join(json.dumps({"type": "user", "message": m}) + "\n" for m in messages)
        try:
            stdout, stderr = process.communicate(lines, timeout=timeout)
        except subprocess.TimeoutExpired:
            kill(process)
            raise AssertionError(f"claude took over {timeout} s") from None
        return ClaudeTurn.parse(AgentResult(process.returncode, stdout, stderr).check())

    def sessions(self) -> list[Path]:
        """Every session file (no sub-agent files), oldest first by name."""
        return sorted((self.agent_dir / "projects").glob("*/*.jsonl"))

    def session_file(self, session_id: str) -> Path:
        """The file of session ``session_id`` (it must exist)."""
        found = list((self.agent_dir / "projects").glob(f"*/{session_id}.jsonl"))
        if len(found) != 1:
            raise AssertionError(f"{len(found)} files for Claude session {session_id}")
        return found[0]


@dataclass(frozen=True)
class ClaudeTurn:
    """What ``claude -p --output-format json`` (or ``stream-json``: its last line)
    printed for one turn."""

    session_id: str
    result: str
    output: dict[str, object]

    @classmethod
    def parse(cls, run: AgentResult) -> ClaudeTurn:
        try:
            output = json.loads(run.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError) as error:
            raise AssertionError(f"claude printed no JSON result:\n{run.stdout[-2000:]}") from error
        if output.get("is_error"):
            raise AssertionError(f"claude reported an error: {output}")
        return cls(str(output.get("session_id")), str(output.get("result", "")), output)


@dataclass
class CopilotAgent(RealAgent):
    """GitHub Copilot CLI 1.0 in prompt mode, offline (``COPILOT_OFFLINE``, the fake
    server as its provider): ``copilot -p PROMPT --allow-all-tools``; ``--continue``
    goes on with the newest session. Sessions in ``<home>/.copilot/session-state/``."""

    name = "copilot"

    @classmethod
    def at_home(cls, home: Path, model_url: str, model_id: str, install: Path) -> Self:
        return cls(home, home / ".copilot", model_url, model_id, install).configure()

    def write_config(self) -> None:
        self.agent_dir.mkdir(parents=True, exist_ok=True)

    def agent_env(self) -> dict[str, str]:
        return {
            "COPILOT_HOME": str(self.agent_dir),
            "COPILOT_OFFLINE": "true",
            "COPILOT_PROVIDER_BASE_URL": self.model_url,
            "COPILOT_PROVIDER_API_KEY": FAKE_API_KEY,
            "COPILOT_MODEL": self.model_id,
            "COPILOT_AUTO_UPDATE": "false",
        }

    def command(self, prompt: str, session: Path | None, options: Sequence[str] = ()) -> list[str]:
        binary = self.install / "node_modules" / ".bin" / "copilot"
        return [str(binary), "-p", prompt, "--allow-all-tools", "--no-auto-update", *options]

    def sessions(self) -> list[Path]:
        return sorted((self.agent_dir / "session-state").glob("*/events.jsonl"))


@dataclass
class OpencodeAgent(RealAgent):
    """opencode 1.18 offline (a ``fake`` provider in ``opencode.json``, model fetches,
    updates, LSP downloads and default plugins off): ``opencode run PROMPT``,
    ``--continue``, ``--session ID --fork``. Sessions in
    ``<home>/.local/share/opencode/opencode.db``."""

    name = "opencode"

    @classmethod
    def at_home(cls, home: Path, model_url: str, model_id: str, install: Path) -> Self:
        agent_dir = home / ".local" / "share" / "opencode"
        return cls(home, agent_dir, model_url, model_id, install).configure()

    def write_config(self) -> None:
        provider = {
            "npm": "@ai-sdk/openai-compatible",
            "name": "Fake",
            "options": {"baseURL": self.model_url, "apiKey": FAKE_API_KEY},
            "models": {self.model_id: {"name": self.model_id}},
        }
        config = {
            "provider": {FAKE_PROVIDER: provider},
            "model": f"{FAKE_PROVIDER}/{self.model_id}",
            "small_model": f"{FAKE_PROVIDER}/{self.model_id}",
            "autoupdate": False,
            "share": "disabled",
            "permission": {"bash": "allow", "edit": "allow"},
        }
        config_dir = self.home / ".config" / "opencode"
        config_dir.mkdir(parents=True, exist_ok=True)
        (config_dir / "opencode.json").write_text(json.dumps(config, indent=2))

    def agent_env(self) -> dict[str, str]:
        return {
            "OPENCODE_DISABLE_MODELS_FETCH": "1",
            "OPENCODE_DISABLE_AUTOUPDATE": "1",
            "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
            "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
            "XDG_CONFIG_HOME": str(self.home / ".config"),
            "XDG_DATA_HOME": str(self.home / ".local" / "share"),
            "XDG_CACHE_HOME": str(self.home / ".cache"),
            "XDG_STATE_HOME": str(self.home / ".local" / "state"),
        }

    def command(self, prompt: str, session: Path | None, options: Sequence[str] = ()) -> list[str]:
        binary = self.install / "node_modules" / ".bin" / "opencode"
        return [str(binary), "run", *options, prompt]

    def database(self) -> Path:
        return self.agent_dir / "opencode.db"


class GeminiFamilyAgent(RealAgent):
    """Gemini CLI and its fork Qwen Code: their dir is ``~/.<name>`` (``agent_dir``),
    their settings ``~/.<name>/settings.json``: the auth type `auth_type`, no update
    check, no usage statistics, no telemetry."""

    auth_type = ""

    @classmethod
    def at_home(cls, home: Path, model_url: str, model_id: str, install: Path) -> Self:
        agent = cls(home, home / f".{cls.name}", model_url, model_id, install)
        return agent.configure()

    def write_config(self) -> None:
        self.agent_dir.mkdir(parents=True, exist_ok=True)
        settings = {
            "security": {"auth": {"selectedType": self.auth_type}},
            "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
            "privacy": {"usageStatisticsEnabled": False},
            "telemetry": {"enabled": False},
        }
        (self.agent_dir / "settings.json").write_text(json.dumps(settings, indent=2))


@dataclass
class GeminiAgent(GeminiFamilyAgent):
    """Gemini CLI 0.61 against a fake Gemini API (`fake_gemini_server`): ``gemini -m
    MODEL -p PROMPT``, ``--resume latest`` to continue the project's newest session;
    any API key, the workspace trusted (headless runs refuse an untrusted one). The
    model is named on the command line: without it Gemini first asks a classifier
    model which to use."""

    name = "gemini"
    auth_type = "gemini-api-key"

    def agent_env(self) -> dict[str, str]:
        return {
            "GEMINI_API_KEY": FAKE_API_KEY,
            "GOOGLE_GEMINI_BASE_URL": self.model_url,
            "GEMINI_CLI_TRUST_WORKSPACE": "true",
        }

    def command(self, prompt: str, session: Path | None, options: Sequence[str] = ()) -> list[str]:
        cli = _package_dir(self.install, GEMINI_PACKAGE) / "bundle" / "gemini.js"
        argv = ["node", str(cli), "-m", self.model_id]
        if session is not None:  # the project's newest session is the one continued
            argv += ["--resume", "latest"]
        return [*argv, *options, "-p", prompt]

    def sessions(self) -> list[Path]:
        return sorted((self.agent_dir / "tmp").glob("*/chats/session-*.jsonl"))


def install_qwen(cache: Path | None = None) -> Path:
    """The pinned Qwen Code in ``cache`` (``$SESSIONFS_QWEN_CACHE``); the cache."""
    cache = cache or _cache_dir(QWEN_CACHE_ENV, "npm-qwen")
    return install_node_agent(QWEN_PACKAGE, QWEN_VERSION, cache, "sessionfs-qwen-interop")


@dataclass
class QwenAgent(GeminiFamilyAgent):
    """Qwen Code 0.24 against the fake OpenAI-compatible server: ``qwen -p PROMPT``,
    ``--continue`` to continue the project's newest session; the endpoint, key and
    model from ``OPENAI_BASE_URL``, ``OPENAI_API_KEY`` and ``OPENAI_MODEL``."""

    name = "qwen"
    auth_type = "openai"

    def agent_env(self) -> dict[str, str]:
        return {
            "OPENAI_API_KEY": FAKE_API_KEY,
            "OPENAI_BASE_URL": self.model_url,
            "OPENAI_MODEL": self.model_id,
        }

    def command(self, prompt: str, session: Path | None, options: Sequence[str] = ()) -> list[str]:
        cli = _package_dir(self.install, QWEN_PACKAGE) / "cli-entry.js"
        argv = ["node", str(cli)]
        if session is not None:  # the project's newest session is the one continued
            argv.append("--continue")
        return [*argv, *options, "-p", prompt]

    def sessions(self) -> list[Path]:
        return sorted((self.agent_dir / "projects").glob("*/chats/*.jsonl"))


def default_agent_dir(home: Path, agent: str) -> Path:
    """Where the agent keeps its agent dir when nothing overrides it."""
    return home / f".{agent}" / "agent"


# --------------------------------------------------------------------------- CI entry


def _main(argv: list[str]) -> int:
    if argv != ["install"]:
        print("usage: real_agents.py install", file=sys.stderr)
        return 2
    agents = (
        ("pi", install_pi),
        ("omp", install_omp),
        ("codex", install_codex),
        ("Claude Code", install_claude),
        ("GitHub Copilot CLI", install_copilot),
        ("opencode", install_opencode),
        ("gemini", install_gemini),
        ("qwen", install_qwen),
    )
    for what, install in agents:
        try:
            cache = install()
        except (AgentUnavailable, InstallFailed) as error:
            print(f"ci: installing {what} failed: {error}", file=sys.stderr)
            return 1
        print(f"ci: {what} installed in {cache}")
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
