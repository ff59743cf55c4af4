"""A fake OpenAI-compatible model server for driving the real agents (pi, omp) offline.

The agents are configured with a provider whose ``baseUrl`` is this server (see
`real_agents`); every ``POST /v1/chat/completions`` is recorded (its JSON body, so a
test can assert on exactly which ``messages`` the agent sent the model) and answered
with a scripted assistant text, streamed as OpenAI ``chat.completion.chunk`` SSE events
ending in ``data: [DONE]`` (or as one ``chat.completion`` when the request does not ask
for a stream). ``GET /v1/models`` lists the configured model ids, for agents that probe
it. Replies can be held back (`hold`) so a test can act while the agent waits for its
model, e.g. while it keeps its session file open.

Stdlib only, threaded, bound to 127.0.0.1 on a free port: nothing leaves the machine.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Json = dict[str, Any]

DEFAULT_MODEL = "fake-model"
DEFAULT_REPLY = "fake reply"
#: How long a held reply waits for `release` before it is sent anyway: a test that
#: forgets to release must not leave the agent (and the test run) hanging.
HOLD_LIMIT_S = 120.0


@dataclass(frozen=True)
class ModelRequest:
    """One chat-completions request as the agent sent it."""

    path: str
    body: Json

    @property
    def messages(self) -> list[Json]:
        return list(self.body.get("messages") or [])

    def texts(self) -> list[str]:
        """The text of every message (string content, or the text parts of a list)."""
        return [message_text(m) for m in self.messages]

    def mentions(self, needle: str) -> bool:
        return any(needle in text for text in self.texts())


def message_text(message: Json) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


@dataclass(frozen=True)
class ToolCall:
    """A reply asking the agent to run one tool (``tool_calls``, ``finish_reason``
    ``tool_calls``) instead of a text."""

    name: str
    arguments: Json = field(default_factory=dict)
    call_id: str = "call_fake_1"


#: A scripted reply: a fixed text (or a `ToolCall`), or a function of the request (e.g.
#: to answer a side call such as title generation differently from the main turn).
Reply = str | ToolCall | Callable[[ModelRequest], "str | ToolCall"]


@dataclass
class _Script:
    lock: threading.Lock = field(default_factory=threading.Lock)
    requests: list[ModelRequest] = field(default_factory=list)
    queued: list[Reply] = field(default_factory=list)
    default: Reply = DEFAULT_REPLY
    delay_s: float = 0.0
    released: threading.Event = field(default_factory=threading.Event)
    arrived: threading.Condition = field(default_factory=threading.Condition)


class FakeModelServer:
    """Start with `start` (or use as a context manager); `url` is the ``baseUrl``."""

    def __init__(self, model_ids: tuple[str, ...] = (DEFAULT_MODEL,)) -> None:
        self.model_ids = model_ids
        self._script = _Script()
        self._script.released.set()
        self._httpd = ThreadingHTTPServer(
            ("127.0.0.1", 0), _handler_for(self, self._handler_base())
        )
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    def _handler_base(self) -> type[BaseHTTPRequestHandler]:
        """The request handler of this server's wire format (a server of another wire
        format, e.g. `fake_responses_server`, overrides it and keeps the scripting)."""
        return _ChatHandler

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> FakeModelServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._script.released.set()  # let any held reply finish
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=10)

    def __enter__(self) -> FakeModelServer:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """The OpenAI-style base URL (``…/v1``) to configure the agent with."""
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    # ------------------------------------------------------------------ scripting

    def reply_with(self, *replies: Reply) -> None:
        """The next requests get these replies, in order; later ones the default."""
        with self._script.lock:
            self._script.queued.extend(replies)

    def set_default_reply(self, reply: Reply) -> None:
        with self._script.lock:
            self._script.default = reply

    def set_delay(self, seconds: float) -> None:
        """Wait this long before answering each request (a "slow" model)."""
        with self._script.lock:
            self._script.delay_s = seconds

    @contextmanager
    def hold(self) -> Iterator[None]:
        """Replies wait until the block ends (at most `HOLD_LIMIT_S`)."""
        self._script.released.clear()
        try:
            yield
        finally:
            self._script.released.set()

    # ------------------------------------------------------------------ what was asked

    @property
    def requests(self) -> list[ModelRequest]:
        with self._script.lock:
            return list(self._script.requests)

    def clear_requests(self) -> None:
        with self._script.lock:
            self._script.requests.clear()

    def wait_for_requests(self, count: int, timeout: float = 60.0) -> list[ModelRequest]:
        """Block until at least ``count`` requests arrived; TimeoutError otherwise."""
        deadline = time.monotonic() + timeout
        with self._script.arrived:
            while len(self.requests) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"{len(self.requests)} of {count} model requests arrived")
                self._script.arrived.wait(left)
        return self.requests

    # ------------------------------------------------------------------ the handler's side

    def _record(self, request: ModelRequest) -> Any:
        """Record ``request``; its scripted reply once any hold is over (a `Reply`'s
        text here; a server of another wire format scripts its own kinds of reply)."""
        script = self._script
        with script.lock:
            script.requests.append(request)
            reply = script.queued.pop(0) if script.queued else script.default
            delay = script.delay_s
        with script.arrived:
            script.arrived.notify_all()
        script.released.wait(HOLD_LIMIT_S)
        if delay:
            time.sleep(delay)
        return reply(request) if callable(reply) else reply


def _handler_for(
    server: FakeModelServer, base: type[BaseHTTPRequestHandler]
) -> type[BaseHTTPRequestHandler]:
    return type("Handler", (base,), {"fake": server})


class JsonHandler(BaseHTTPRequestHandler):
    """What every wire format's handler shares: a quiet log, the model list, a JSON
    request body read, JSON and SSE answers."""

    fake: FakeModelServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the agents' requests are recorded, not logged to stderr."""

    def do_GET(self) -> None:
        if self.path.rstrip("/").endswith("/models"):
            models = [{"id": m, "object": "model", "owned_by": "fake"} for m in self.fake.model_ids]
            self._send_json({"object": "list", "data": models})
        else:
            self._send_json({"error": {"message": f"no such path {self.path}"}}, status=404)

    def _json_body(self, endpoint: str) -> Json | None:
        """The POSTed JSON body when the path ends in ``endpoint``; else ``None``, with
        the error already answered."""
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        if not self.path.rstrip("/").endswith(endpoint):
            self._send_json({"error": {"message": f"no such path {self.path}"}}, status=404)
            return None
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError as error:
            self._send_json({"error": {"message": f"bad JSON: {error}"}}, status=400)
            return None
        return body if isinstance(body, dict) else {"body": body}

    def _send_json(self, payload: Json, status: int = 200) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _start_events(self) -> None:
        """Answer with an SSE stream, ended by closing the connection."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True

    def _send_event(self, data: Json | str, event: str | None = None) -> None:
        """One SSE event (``event:`` line when named, then its ``data:``)."""
        head = f"event: {event}\n".encode() if event else b""
        payload = data if isinstance(data, str) else json.dumps(data)
        self.wfile.write(head + b"data: " + payload.encode() + b"\n\n")
        self.wfile.flush()


class _ChatHandler(JsonHandler):
    def do_POST(self) -> None:
        body = self._json_body("/chat/completions")
        if body is None:
            return
        text = self.fake._record(ModelRequest(self.path, body))
        model = str(body.get("model") or DEFAULT_MODEL)
        if isinstance(text, ToolCall):
            self._send_tool_call(model, text, bool(body.get("stream")))
        elif body.get("stream"):
            self._stream(model, text)
        else:
            self._send_json(_completion(model, text))

    def _send_tool_call(self, model: str, call: ToolCall, stream: bool) -> None:
        wire = {
            "id": call.call_id,
            "type": "function",
            "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
        }
        answer = {"role": "assistant", "content": None, "tool_calls": [{"index": 0, **wire}]}
        if not stream:
            completion = _completion(model, "")
            completion["choices"][0].update(message=answer, finish_reason="tool_calls")
            self._send_json(completion)
            return
        chunks = _chunks(model, "")  # the role, the stop, the usage: no text
        chunks[1]["choices"][0]["finish_reason"] = "tool_calls"
        chunks.insert(1, {**chunks[0], "choices": [{"index": 0, "delta": answer}]})
        self._start_events()
        for chunk in chunks:
            self._send_event(chunk)
        self._send_event("[DONE]")

    def _stream(self, model: str, text: str) -> None:
        self._start_events()
        for chunk in _chunks(model, text):
            self._send_event(chunk)
        self._send_event("[DONE]")


_ids = iter(range(1, 1 << 62))
_ids_lock = threading.Lock()


def _completion_id() -> str:
    with _ids_lock:
        return f"chatcmpl-fake-{next(_ids)}"


def _usage(text: str) -> Json:
    completion = max(1, len(text.split()))
    return {"prompt_tokens": 10, "completion_tokens": completion, "total_tokens": 10 + completion}


def _chunks(model: str, text: str) -> list[Json]:
    """The SSE chunks of one streamed answer: role, the text in a few pieces, the stop,
    then the usage (as OpenAI sends it with ``stream_options.include_usage``)."""
    ident, created = _completion_id(), int(time.time())

    def chunk(delta: Json, finish: str | None = None) -> Json:
        return {
            "id": ident,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    words = text.split(" ")
    pieces = [w + (" " if i < len(words) - 1 else "") for i, w in enumerate(words)]
    return [
        chunk({"role": "assistant", "content": ""}),
        *(chunk({"content": piece}) for piece in pieces if piece),
        chunk({}, "stop"),
        {
            "id": ident,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [],
            "usage": _usage(text),
        },
    ]


def _completion(model: str, text: str) -> Json:
    return {
        "id": _completion_id(),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "stop",
            }
        ],
        "usage": _usage(text),
    }
