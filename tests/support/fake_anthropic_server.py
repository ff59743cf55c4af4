"""A fake Anthropic Messages server for driving the real Claude Code offline.

Claude Code is pointed at it with ``ANTHROPIC_BASE_URL`` (`base_url`; see
`real_agents.ClaudeAgent`). Every ``POST /v1/messages`` is recorded (its JSON body: a
test asserts on exactly which ``system`` and ``messages`` the agent sent the model) and
answered with a scripted reply streamed as Anthropic's SSE events -- ``message_start``,
per content block ``content_block_start`` / ``content_block_delta`` /
``content_block_stop``, ``message_delta`` (stop reason and usage), ``message_stop`` --
or as one JSON message when the request does not ask for a stream.
``POST /v1/messages/count_tokens`` answers a token count and is not recorded.

A reply is a text, a list of content blocks (`text`, `thinking`, `tool_use`: a
``tool_use`` block makes the stop reason ``tool_use``, so the agent runs the tool and
asks again with its result), or a function of the request giving either. Scripting
(`reply_with`, `hold`, `wait_for_requests`) is `fake_model_server.FakeModelServer`'s;
only the wire format differs.

Stdlib only, threaded, bound to 127.0.0.1 on a free port: nothing leaves the machine.
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from typing import Any, cast

from support.fake_model_server import (
    DEFAULT_MODEL,
    FakeModelServer,
    Json,
    JsonHandler,
    ModelRequest,
    Reply,
)

Block = dict[str, Any]
#: What a request is answered with: a text, content blocks, or a function of the request.
AnthropicReply = str | list[Block] | Callable[[ModelRequest], "str | list[Block]"]

#: Usage every answer reports, so a session's token counts are known to a test: input
#: grows with the messages sent (each request differs), the rest is fixed.
INPUT_TOKENS_BASE = 100
CACHE_READ_TOKENS = 7
CACHE_WRITE_TOKENS = 3

_counter = itertools.count(1)
_counter_lock = threading.Lock()


def _next_id(prefix: str) -> str:
    with _counter_lock:
        return f"{prefix}_fake{next(_counter):020d}"


def text(value: str) -> Block:
    """A text block of a scripted reply."""
    return {"type": "text", "text": value}


def thinking(value: str, signature: str = "fake-signature") -> Block:
    """A thinking block of a scripted reply (streamed as thinking and signature deltas)."""
    return {"type": "thinking", "thinking": value, "signature": signature}


def tool_use(name: str, arguments: dict[str, Any], call_id: str | None = None) -> Block:
    """A tool call of a scripted reply (``call_id`` made up when not given)."""
    return {
        "type": "tool_use",
        "id": call_id or _next_id("toolu"),
        "name": name,
        "input": arguments,
    }


def reply_blocks(reply: str | list[Block]) -> list[Block]:
    """A reply as its content blocks; a ``tool_use`` without an id gets one."""
    if isinstance(reply, str):
        return [text(reply)]
    return [
        {**block, "id": _next_id("toolu")}
        if block.get("type") == "tool_use" and not block.get("id")
        else block
        for block in reply
    ]


def usage_for(body: Json, blocks: list[Block]) -> Json:
    """The usage an answer to ``body`` reports (see `INPUT_TOKENS_BASE`)."""
    sent = len(json.dumps(body.get("messages") or []))
    said = sum(len(json.dumps(block)) for block in blocks)
    return {
        "input_tokens": INPUT_TOKENS_BASE + sent // 100,
        "output_tokens": max(1, said // 10),
        "cache_read_input_tokens": CACHE_READ_TOKENS,
        "cache_creation_input_tokens": CACHE_WRITE_TOKENS,
    }


class FakeAnthropicServer(FakeModelServer):
    """Start with `start` (or use as a context manager); `base_url` is what
    ``ANTHROPIC_BASE_URL`` is set to."""

    def __init__(self, model_ids: tuple[str, ...] = (DEFAULT_MODEL,)) -> None:
        super().__init__(model_ids)
        self._answers: list[tuple[ModelRequest, Json]] = []
        self._answers_lock = threading.Lock()

    def _handler_base(self) -> type[BaseHTTPRequestHandler]:
        return _MessagesHandler

    def answered(self) -> list[tuple[ModelRequest, Json]]:
        """Every recorded request with the message it was answered with (its usage is
        what the agent counts), in the order the answers were sent."""
        with self._answers_lock:
            return list(self._answers)

    def _note_answer(self, request: ModelRequest, message: Json) -> None:
        with self._answers_lock:
            self._answers.append((request, message))

    @property
    def base_url(self) -> str:
        """The server's root (Claude Code appends ``/v1/messages`` itself)."""
        return self.url.removesuffix("/v1")

    def reply_with(self, *replies: AnthropicReply) -> None:
        """The next requests get these replies, in order; later ones the default."""
        super().reply_with(*cast(tuple[Reply, ...], replies))

    def set_default_reply(self, reply: AnthropicReply) -> None:
        super().set_default_reply(cast(Reply, reply))


class _MessagesHandler(JsonHandler):
    fake: FakeAnthropicServer

    def do_POST(self) -> None:
        # Claude Code asks for ``/v1/messages?beta=true``: route by the path alone.
        self.path = self.path.split("?")[0]
        if self.path.rstrip("/").endswith("/messages/count_tokens"):
            body = self._json_body("/messages/count_tokens")
            if body is not None:
                self._send_json({"input_tokens": usage_for(body, [])["input_tokens"]})
            return
        body = self._json_body("/messages")
        if body is None:
            return
        request = ModelRequest(self.path, body)
        blocks = reply_blocks(self.fake._record(request))
        model = str(body.get("model") or DEFAULT_MODEL)
        message = _message(model, blocks, usage_for(body, blocks))
        self.fake._note_answer(request, message)
        if body.get("stream"):
            self._stream(message)
        else:
            self._send_json(message)

    def _stream(self, message: Json) -> None:
        self._start_events()
        start = {**message, "content": [], "stop_reason": None}
        start["usage"] = {**message["usage"], "output_tokens": 1}
        self._send_event({"type": "message_start", "message": start}, "message_start")
        for index, block in enumerate(message["content"]):
            for event in _block_events(index, block):
                self._send_event(event, event["type"])
        delta = {
            "type": "message_delta",
            "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
            "usage": message["usage"],
        }
        self._send_event(delta, "message_delta")
        self._send_event({"type": "message_stop"}, "message_stop")


def _message(model: str, blocks: list[Block], usage: Json) -> Json:
    calls = any(block.get("type") == "tool_use" for block in blocks)
    return {
        "id": _next_id("msg"),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": blocks,
        "stop_reason": "tool_use" if calls else "end_turn",
        "stop_sequence": None,
        "usage": usage,
    }


def _block_events(index: int, block: Block) -> list[Json]:
    """One block as its start, its deltas (text, the tool input as JSON, or a thinking
    text and its signature), and stop."""
    kind = block.get("type")
    deltas: list[Json]
    if kind == "tool_use":
        opening = {**block, "input": {}}
        deltas = [{"type": "input_json_delta", "partial_json": json.dumps(block.get("input", {}))}]
    elif kind == "text":
        opening = {"type": "text", "text": ""}
        deltas = [{"type": "text_delta", "text": str(block.get("text", ""))}]
    elif kind == "thinking":
        opening = {"type": "thinking", "thinking": "", "signature": ""}
        deltas = [
            {"type": "thinking_delta", "thinking": str(block.get("thinking", ""))},
            {"type": "signature_delta", "signature": str(block.get("signature", ""))},
        ]
    else:  # any other block is sent whole in its start event
        opening, deltas = block, []
    start = {"type": "content_block_start", "index": index, "content_block": opening}
    updates = [{"type": "content_block_delta", "index": index, "delta": d} for d in deltas]
    return [start, *updates, {"type": "content_block_stop", "index": index}]
