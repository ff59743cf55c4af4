"""A fake OpenAI Responses API server, for driving the real Codex CLI offline.

Codex (`real_agents.CodexAgent`) is configured with a provider whose ``base_url`` is
this server and ``wire_api = "responses"``. Every ``POST /v1/responses`` is recorded
(its JSON body: ``input`` is exactly the history Codex sent the model, ``instructions``
and ``tools`` beside it) and answered with a scripted reply streamed as Responses SSE
events: ``response.created``, then per output item ``response.output_item.added``, its
``response.output_text.delta`` / ``response.function_call_arguments.delta`` pieces,
``response.output_item.done``, and last ``response.completed`` with the usage.

A scripted reply is a text (one assistant message), a `FunctionCall` (e.g. Codex's
shell tool ``exec_command {"cmd": …}``), an `Answer` of several output items (texts,
calls, `Reasoning`) and an optional usage, or a function of the request returning one
of those. Queueing, holding and waiting for requests are
`fake_model_server.FakeModelServer`'s.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from support.fake_model_server import (
    DEFAULT_MODEL,
    FakeModelServer,
    Json,
    JsonHandler,
    ModelRequest,
)

__all__ = [
    "Answer",
    "FakeResponsesServer",
    "FunctionCall",
    "Reasoning",
    "ResponsesRequest",
    "Usage",
]


@dataclass(frozen=True)
class ResponsesRequest(ModelRequest):
    """One ``/responses`` request: ``messages`` are its ``input`` items (messages,
    function calls and their outputs, in the order sent)."""

    @property
    def messages(self) -> list[Json]:
        return list(self.body.get("input") or [])

    @property
    def instructions(self) -> str:
        return str(self.body.get("instructions") or "")

    @property
    def thread_id(self) -> str | None:
        """The thread the request is for (Codex's ``client_metadata.thread_id``; its
        ``prompt_cache_key`` is the session's, which a sub-agent shares)."""
        metadata = self.body.get("client_metadata")
        key = metadata.get("thread_id") if isinstance(metadata, dict) else None
        return key if isinstance(key, str) else None

    def items(self, kind: str) -> list[Json]:
        """The input items of one ``type`` (``message``, ``function_call``, …)."""
        return [item for item in self.messages if item.get("type") == kind]


@dataclass(frozen=True)
class FunctionCall:
    """The model calls a tool: ``name`` with ``arguments`` (sent as a JSON string)."""

    name: str
    arguments: Json
    call_id: str | None = None
    #: the tool namespace the tool was offered in (Codex's ``multi_agent_v1``), if any
    namespace: str | None = None


@dataclass(frozen=True)
class Reasoning:
    """The model's reasoning item: a readable ``summary`` and the opaque
    ``encrypted_content`` a client sends back on its next request."""

    summary: str
    encrypted_content: str = "fake-encrypted-reasoning"


@dataclass(frozen=True)
class Usage:
    """What ``response.completed`` reports (Codex records it in ``token_count``)."""

    input_tokens: int = 100
    cached_input_tokens: int = 0
    output_tokens: int = 10
    reasoning_output_tokens: int = 0

    def wire(self) -> Json:
        return {
            "input_tokens": self.input_tokens,
            "input_tokens_details": {"cached_tokens": self.cached_input_tokens},
            "output_tokens": self.output_tokens,
            "output_tokens_details": {"reasoning_tokens": self.reasoning_output_tokens},
            "total_tokens": self.input_tokens + self.output_tokens,
        }


Output = str | FunctionCall | Reasoning


@dataclass(frozen=True)
class Answer:
    """One response of several output items (texts and calls, in order); ``usage``
    ``None``: the server's default."""

    outputs: Sequence[Output]
    usage: Usage | None = None


ResponsesReply = Output | Answer | Callable[[ResponsesRequest], "Output | Answer"]


class FakeResponsesServer(FakeModelServer):
    """`url` is the ``base_url`` (``…/v1``); `requests` are `ResponsesRequest`s."""

    def __init__(self, model_ids: tuple[str, ...] = (DEFAULT_MODEL,)) -> None:
        super().__init__(model_ids)
        self.default_usage = Usage()

    def _handler_base(self) -> type[BaseHTTPRequestHandler]:
        return _ResponsesHandler

    def reply_with(self, *replies: ResponsesReply) -> None:  # type: ignore[override]
        """The next requests get these replies, in order; later ones the default."""
        super().reply_with(*replies)  # type: ignore[arg-type]

    def set_default_reply(self, reply: ResponsesReply) -> None:  # type: ignore[override]
        super().set_default_reply(reply)  # type: ignore[arg-type]

    @property
    def requests(self) -> list[ResponsesRequest]:  # type: ignore[override]
        return [r for r in super().requests if isinstance(r, ResponsesRequest)]

    def wait_for_requests(self, count: int, timeout: float = 60.0) -> list[ResponsesRequest]:  # type: ignore[override]
        super().wait_for_requests(count, timeout)
        return self.requests


_ids = iter(range(1, 1 << 62))
_ids_lock = threading.Lock()


def _next_id(prefix: str) -> str:
    with _ids_lock:
        return f"{prefix}_fake{next(_ids)}"


@dataclass
class _Stream:
    """The SSE events of one response, numbered as the Responses API numbers them."""

    model: str
    events: list[tuple[str, Json]] = field(default_factory=list)

    def add(self, event: str, **data: Any) -> None:
        self.events.append((event, {"type": event, "sequence_number": len(self.events), **data}))

    def item(self, index: int, output: Output) -> None:
        if isinstance(output, FunctionCall):
            self._call(index, output)
        elif isinstance(output, Reasoning):
            self._reasoning(index, output)
        else:
            self._message(index, output)

    def _reasoning(self, index: int, reasoning: Reasoning) -> None:
        item_id = _next_id("rs")
        start = {"type": "reasoning", "id": item_id, "summary": []}
        self.add("response.output_item.added", output_index=index, item=start)
        part = {"type": "summary_text", "text": reasoning.summary}
        self.add(
            "response.reasoning_summary_text.delta",
            item_id=item_id,
            output_index=index,
            summary_index=0,
            delta=reasoning.summary,
        )
        done = {**start, "summary": [part], "encrypted_content": reasoning.encrypted_content}
        self.add("response.output_item.done", output_index=index, item=done)

    def _message(self, index: int, text: str) -> None:
        item_id = _next_id("msg")
        start = {
            "type": "message",
            "id": item_id,
            "role": "assistant",
            "status": "in_progress",
            "content": [],
        }
        self.add("response.output_item.added", output_index=index, item=start)
        for piece in _pieces(text):
            self.add(
                "response.output_text.delta",
                item_id=item_id,
                output_index=index,
                content_index=0,
                delta=piece,
            )
        part = {"type": "output_text", "text": text, "annotations": []}
        done = {**start, "status": "completed", "content": [part]}
        self.add("response.output_item.done", output_index=index, item=done)

    def _call(self, index: int, call: FunctionCall) -> None:
        item_id = _next_id("fc")
        arguments = json.dumps(call.arguments)
        start = {
            "type": "function_call",
            "id": item_id,
            "call_id": call.call_id or _next_id("call"),
            "name": call.name,
            "arguments": "",
            "status": "in_progress",
        }
        if call.namespace is not None:
            start["namespace"] = call.namespace
        self.add("response.output_item.added", output_index=index, item=start)
        self.add(
            "response.function_call_arguments.delta",
            item_id=item_id,
            output_index=index,
            delta=arguments,
        )
        done = {**start, "arguments": arguments, "status": "completed"}
        self.add("response.output_item.done", output_index=index, item=done)


def _pieces(text: str) -> list[str]:
    words = text.split(" ")
    return [w + (" " if i < len(words) - 1 else "") for i, w in enumerate(words) if w or i == 0]


def _events(model: str, answer: Answer, usage: Usage) -> list[tuple[str, Json]]:
    stream = _Stream(model)
    response = {"id": _next_id("resp"), "object": "response", "model": model, "output": []}
    stream.add("response.created", response={**response, "status": "in_progress"})
    for index, output in enumerate(answer.outputs):
        stream.item(index, output)
    done = {**response, "status": "completed", "usage": usage.wire()}
    stream.add("response.completed", response=done)
    return stream.events


class _ResponsesHandler(JsonHandler):
    fake: FakeResponsesServer

    def do_POST(self) -> None:
        body = self._json_body("/responses")
        if body is None:
            return
        request = ResponsesRequest(self.path, body)
        reply = self.fake._record(request)  # a function of the request already called
        answer = reply if isinstance(reply, Answer) else Answer([reply])
        model = str(body.get("model") or DEFAULT_MODEL)
        self._start_events()
        for event, data in _events(model, answer, answer.usage or self.fake.default_usage):
            self._send_event(data, event)
