"""A small stand-in for one vLLM server, for the replica pool's and deployer's logic tests.

Real HTTP on a loopback port (uvicorn in a thread of its own, like tests/api/server.py): the
endpoints the pool uses, answering as vLLM does — GET /health, GET /v1/models (adapters with
their `root` folder), POST /v1/load_lora_adapter and /v1/unload_lora_adapter, and
POST /v1/chat/completions (whole or streamed, with token ids and logprobs). An unknown model
is a 404. `events` records, in order, each adapter load and each completion request, so a test
can tell what a replica had loaded when it first served. `stop()` closes the port (connection
refused); `start()` opens it again at the same port, as a new process would: no adapters.

The real thing is tested in tests/models/test_replicas_vllm.py.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from typing import Any

import uvicorn
from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse, StreamingResponse

BASE = "fake-base"
IDS = [11, 12, 13]


class FakeVllm:
    def __init__(self) -> None:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        self.healthy = True  # False: /health answers 503
        self.fail_loads = False  # True: /v1/load_lora_adapter answers 500
        self.break_streams = False  # True: a stream dies after its first chunk
        self.adapters: dict[str, str] = {}  # name -> lora_path
        self.events: list[tuple[str, str]] = []  # ("load" | "chat", name or model)
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def chats(self) -> list[str]:
        return [what for kind, what in self.events if kind == "chat"]

    def start(self) -> FakeVllm:
        self.adapters.clear()  # a new process: nothing loaded
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", self.port))
        config = uvicorn.Config(self._app(), log_level="warning", lifespan="off")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            assert self._thread.is_alive() and time.monotonic() < deadline, "fake did not start"
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        if self._server is not None and self._thread is not None:
            self._server.should_exit = True
            self._thread.join(10)
            self._server = self._thread = None

    def _app(self) -> FastAPI:
        app = FastAPI()

        @app.get("/health")
        async def health() -> Response:
            return Response(status_code=200 if self.healthy else 503)

        @app.get("/v1/models")
        async def models() -> dict[str, Any]:
            data = [{"id": BASE, "root": BASE, "max_model_len": 2048}]
            data += [{"id": n, "root": p, "parent": BASE} for n, p in self.adapters.items()]
            return {"object": "list", "data": data}

        @app.post("/v1/load_lora_adapter")
        async def load(request: Request) -> Response:
            body = await request.json()
            name, path = body["lora_name"], body["lora_path"]
            if self.fail_loads:
                return _error(500, f"cannot load {name}")
            if name in self.adapters:
                return _error(400, f"The lora adapter '{name}' has already been loaded.")
            self.adapters[name] = path
            self.events.append(("load", name))
            return Response(f"Success: LoRA adapter '{name}' added successfully.")

        @app.post("/v1/unload_lora_adapter")
        async def unload(request: Request) -> Response:
            name = (await request.json())["lora_name"]
            if self.adapters.pop(name, None) is None:
                return _error(404, f"The lora adapter '{name}' cannot be found.")
            return Response(f"Success: LoRA adapter '{name}' removed successfully.")

        @app.post("/v1/chat/completions")
        async def chat(request: Request) -> Response:
            body = await request.json()
            model = body["model"]
            self.events.append(("chat", model))
            if model != BASE and model not in self.adapters:
                return _error(404, f"The model `{model}` does not exist.")
            if body.get("stream"):
                return StreamingResponse(self._events(), media_type="text/event-stream")
            logprobs = [{"token": f"token_id:{i}", "logprob": -0.5} for i in IDS]
            return JSONResponse({
                "model": model,
                "prompt_token_ids": [1, 2],
                "choices": [{"index": 0, "message": {"role": "assistant", "content": "abc"},
                             "logprobs": {"content": logprobs}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 2, "completion_tokens": len(IDS)},
            })  # fmt: skip

        return app

    async def _events(self):  # type: ignore[no-untyped-def]
        yield _sse({"prompt_token_ids": [1, 2], "choices": [{"delta": {"role": "assistant"}}]})
        for n, i in enumerate(IDS):
            if n == 1 and self.break_streams:
                raise RuntimeError("the fake server dies mid-stream")
            last = n == len(IDS) - 1
            yield _sse({"choices": [{
                "delta": {"content": "abc"[n]}, "finish_reason": "stop" if last else None,
                "logprobs": {"content": [{"token": f"token_id:{i}", "logprob": -0.5}]},
            }]})  # fmt: skip
        yield _sse({"choices": [], "usage": {"prompt_tokens": 2, "completion_tokens": len(IDS)}})
        yield "data: [DONE]\n\n"


def _sse(data: dict[str, Any]) -> str:
    return f"data: {json.dumps(data)}\n\n"


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": {"message": message, "code": status}}, status_code=status)
