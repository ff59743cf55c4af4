"""A fake Gemini API server for driving the real Gemini CLI (and its forks) offline.

Gemini CLI is pointed here with ``GOOGLE_GEMINI_BASE_URL`` (`real_agents.GeminiAgent`).
Every ``POST /v1beta/models/<model>:streamGenerateContent?alt=sse`` and
``…:generateContent`` is recorded (its JSON body: ``contents``, ``systemInstruction``,
``tools``) and answered with the scripted reply: a text, or a `FunctionCall` (the
model asking the CLI to run a tool), streamed as ``GenerateContentResponse`` SSE events
(or as one response for ``generateContent``). The scripting, holding and recording
are `fake_model_server.FakeModelServer`'s.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from support.fake_model_server import FakeModelServer, JsonHandler, ModelRequest

Json = dict[str, Any]

GEMINI_MODEL = "gemini-2.5-flash"


@dataclass(frozen=True)
class FunctionCall:
    """A reply asking for one tool call: ``{"functionCall": {name, args}}``."""

    name: str
    args: Json = field(default_factory=dict)


GeminiReply = str | FunctionCall | Callable[[ModelRequest], "str | FunctionCall"]


def contents_of(request: ModelRequest) -> list[Json]:
    """The ``contents`` (the conversation) of a recorded request."""
    return [c for c in request.body.get("contents") or [] if isinstance(c, dict)]


def content_texts(content: Json) -> list[str]:
    """The text parts of one ``content`` (thoughts included, tagged or not)."""
    return [p["text"] for p in content.get("parts") or [] if isinstance(p.get("text"), str)]


def is_conversation_turn(request: ModelRequest) -> bool:
    """A request of the conversation itself (streamed, with tools), not a side call
    such as the next-speaker check or a summary."""
    return ":streamGenerateContent" in request.path and bool(request.body.get("tools"))


class FakeGeminiServer(FakeModelServer):
    """`FakeModelServer` speaking the Gemini API; `url` is ``GOOGLE_GEMINI_BASE_URL``."""

    def __init__(self, model_ids: tuple[str, ...] = (GEMINI_MODEL,)) -> None:
        super().__init__(model_ids)

    def _handler_base(self) -> type[BaseHTTPRequestHandler]:
        return _GeminiHandler

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def turns(self) -> list[ModelRequest]:
        """The conversation's requests (`is_conversation_turn`), oldest first."""
        return [r for r in self.requests if is_conversation_turn(r)]


class _GeminiHandler(JsonHandler):
    def do_GET(self) -> None:
        self._send_json({"error": {"message": f"no such path {self.path}"}}, status=404)

    def do_POST(self) -> None:
        path = self.path.split("?", 1)[0]
        model, _, method = path.rpartition("/")[2].partition(":")
        if method not in ("streamGenerateContent", "generateContent"):
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self._send_json({"error": {"message": f"no such path {self.path}"}}, status=404)
            return
        body = self._json_body("")  # the path is checked above (it ends in ``?alt=sse``)
        if body is None:
            return
        reply = self.fake._record(ModelRequest(self.path, body))
        response = _response(model or GEMINI_MODEL, reply)
        if method == "streamGenerateContent":
            self._start_events()
            for event in _stream_events(response):
                self._send_event(event)
        else:
            self._send_json(response)


def _usage(reply: str | FunctionCall) -> Json:
    words = len(reply.split()) if isinstance(reply, str) else 5
    return {"promptTokenCount": 10, "candidatesTokenCount": words, "totalTokenCount": 10 + words}


def _response(model: str, reply: str | FunctionCall) -> Json:
    """The whole ``GenerateContentResponse`` of one reply."""
    if isinstance(reply, FunctionCall):
        parts: list[Json] = [{"functionCall": {"name": reply.name, "args": reply.args}}]
    else:
        parts = [{"text": reply}]
    return {
        "candidates": [
            {"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}
        ],
        "usageMetadata": _usage(reply),
        "modelVersion": model,
    }


def _stream_events(response: Json) -> list[Json]:
    """The response as the stream sends it: a text in a few pieces, the finish reason
    and usage on the last one (a function call arrives whole)."""
    candidate = response["candidates"][0]
    parts = candidate["content"]["parts"]
    if "text" not in parts[0]:
        return [response]
    words = parts[0]["text"].split(" ")
    pieces = [w + (" " if i < len(words) - 1 else "") for i, w in enumerate(words)]
    events = [
        {"candidates": [{"content": {"role": "model", "parts": [{"text": piece}]}, "index": 0}]}
        for piece in pieces[:-1]
    ]
    last = {"role": "model", "parts": [{"text": pieces[-1]}]}
    events.append({**response, "candidates": [{**candidate, "content": last}]})
    return events
