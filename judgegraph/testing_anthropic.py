"""A loopback server that also speaks Anthropic's Messages API (``POST /v1/messages``).

Same responders and faults as :class:`judgegraph.testing.LoopbackServer`, so
the real ``anthropic`` client (and ``langchain-anthropic``'s ChatAnthropic)
runs end to end against 127.0.0.1::

    with AnthropicLoopbackServer(lambda req: Reply('{"score": 4}')) as server:
        model = ChatAnthropic(model="claude-sonnet-4-5", base_url=server.url, api_key="x")

A request that forces a tool (structured output by tool calling) is answered
with a ``tool_use`` block whose input is the reply text read as JSON.
"""

from __future__ import annotations

import json
from typing import Any

from judgegraph.testing import LoopbackRequest, LoopbackServer, Reply, tokenize

__all__ = ["AnthropicLoopbackServer"]


class AnthropicLoopbackServer(LoopbackServer):
    def _body(self, req: LoopbackRequest, reply: Reply) -> Any:
        if not req.path.rstrip("/").endswith("/messages"):
            return super()._body(req, reply)
        tools = req.body.get("tools") or []
        choice = req.body.get("tool_choice") or {}
        if tools and choice.get("type") == "tool":
            content: list[dict[str, Any]] = [
                {"type": "tool_use", "id": "toolu_loopback", "name": choice["name"], "input": json.loads(reply.text)}
            ]
        else:
            content = [{"type": "text", "text": reply.text}]
        return {
            "id": "msg_loopback",
            "type": "message",
            "role": "assistant",
            "model": str(req.body.get("model", "loopback")),
            "content": content,
            "stop_reason": "max_tokens" if reply.finish_reason == "length" else "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": reply.prompt_tokens, "output_tokens": len(tokenize(reply.text))},
        }
