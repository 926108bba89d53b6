"""Triton's own Python clients (tritonclient[all], pinned in test/python/requirements.txt) against a
Troupe head, as a Triton user would call it: test/integration/python-clients.test.ts runs it with
the interpreter of .venv-clients/ and checks what it prints (one JSON object).

Over HTTP (tritonclient.http, and its asyncio client) and gRPC (tritonclient.grpc, and its asyncio
client): health, server and model metadata, model configuration, the repository index, statistics,
inference with binary tensors, async inference, gRPC's bidirectional stream, and the shared-memory
calls, which Troupe does not serve and must refuse with its documented error.

usage: triton_clients.py HTTP_HOST:PORT GRPC_HOST:PORT MODEL INPUT_FILE ROWS
       (INPUT_FILE: ROWS x 64 float32, little-endian)
"""
import asyncio
import json
import queue
import sys

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.grpc.aio as grpcaio
import tritonclient.http as httpclient
import tritonclient.http.aio as httpaio
from tritonclient.utils import InferenceServerException


def refused(call):
    """What the server answered to a call it must refuse: the client's exception, as text."""
    try:
        call()
    except InferenceServerException as err:
        return {"status": str(err.status()), "message": err.message()}
    return None


def metadata_of(client, model, as_json):
    """The calls that describe the server and the model, in the shape the HTTP client returns."""
    kwargs = {"as_json": True} if as_json else {}
    server = client.get_server_metadata(**kwargs)
    meta = client.get_model_metadata(model, **kwargs)
    config = client.get_model_config(model, **kwargs)
    config = config.get("config", config)
    index = client.get_model_repository_index(**kwargs)
    index = index.get("models", index) if isinstance(index, dict) else index
    stats = client.get_inference_statistics(model, **kwargs)
    return {
        "live": client.is_server_live(),
        "ready": client.is_server_ready(),
        "model_ready": client.is_model_ready(model),
        "server": server["name"],
        "extensions": server.get("extensions", []),
        "inputs": [{"name": t["name"], "datatype": t["datatype"], "shape": [int(d) for d in t["shape"]]} for t in meta["inputs"]],
        "config": {"name": config["name"], "platform": config["platform"]},
        "repository": sorted(m["name"] for m in index),
        "stats_models": [s["name"] for s in stats["model_stats"]],
        "stats_success": int(stats["model_stats"][0]["inference_stats"]["success"].get("count", 0)),
    }


def http_checks(address, model, x):
    out = {}
    client = httpclient.InferenceServerClient(url=address, concurrency=4)
    try:
        out.update(metadata_of(client, model, as_json=False))
        tensor = httpclient.InferInput("x", list(x.shape), "FP32")
        tensor.set_data_from_numpy(x, binary_data=True)
        wanted = [httpclient.InferRequestedOutput("logits", binary_data=True)]
        result = client.infer(model, [tensor], outputs=wanted, request_id="http-1")
        out["binary"] = {"id": result.get_response()["id"], "logits": result.as_numpy("logits").tolist()}
        pending = [client.async_infer(model, [tensor], outputs=wanted) for _ in range(4)]
        out["async"] = [p.get_result(timeout=60).as_numpy("logits").tolist() for p in pending]
        out["shared_memory"] = {
            "register_system": refused(lambda: client.register_system_shared_memory("r", "/troupe-test", 256)),
            "status_system": refused(client.get_system_shared_memory_status),
            "register_cuda": refused(lambda: client.register_cuda_shared_memory("r", b"aGFuZGxl", 0, 256)),
        }
    finally:
        client.close()
    out["aio"] = asyncio.run(http_aio(address, model, x))
    return out


async def http_aio(address, model, x):
    async with httpaio.InferenceServerClient(url=address) as client:
        tensor = httpaio.InferInput("x", list(x.shape), "FP32")
        tensor.set_data_from_numpy(x, binary_data=True)
        results = await asyncio.gather(*(client.infer(model, [tensor]) for _ in range(4)))
        return [r.as_numpy("logits").tolist() for r in results]


def grpc_checks(address, model, x):
    out = {}
    client = grpcclient.InferenceServerClient(url=address)
    try:
        out.update(metadata_of(client, model, as_json=True))
        tensor = grpcclient.InferInput("x", list(x.shape), "FP32")
        tensor.set_data_from_numpy(x)
        wanted = [grpcclient.InferRequestedOutput("logits")]
        result = client.infer(model, [tensor], outputs=wanted, request_id="grpc-1")
        out["binary"] = {"id": result.get_response().id, "logits": result.as_numpy("logits").tolist()}

        answers = queue.Queue()
        for _ in range(4):
            client.async_infer(model, [tensor], callback=lambda result, error: answers.put((result, error)), outputs=wanted)
        out["async"] = []
        for _ in range(4):
            result, error = answers.get(timeout=60)
            out["async"].append(str(error) if error else result.as_numpy("logits").tolist())

        streamed = queue.Queue()
        client.start_stream(callback=lambda result, error: streamed.put((result, error)))
        for i in range(3):
            client.async_stream_infer(model, [tensor], request_id=f"stream-{i}", outputs=wanted)
        out["stream"] = []
        for _ in range(3):
            result, error = streamed.get(timeout=60)
            out["stream"].append(
                {"error": str(error)} if error else {"id": result.get_response().id, "logits": result.as_numpy("logits").tolist()}
            )
        client.stop_stream()
        out["shared_memory"] = {
            "register_system": refused(lambda: client.register_system_shared_memory("r", "/troupe-test", 256)),
            "status_system": refused(client.get_system_shared_memory_status),
            "register_cuda": refused(lambda: client.register_cuda_shared_memory("r", b"aGFuZGxl", 0, 256)),
        }
    finally:
        client.close()
    out["aio"] = asyncio.run(grpc_aio(address, model, x))
    return out


async def grpc_aio(address, model, x):
    async with grpcaio.InferenceServerClient(url=address) as client:
        tensor = grpcaio.InferInput("x", list(x.shape), "FP32")
        tensor.set_data_from_numpy(x)
        results = await asyncio.gather(*(client.infer(model, [tensor]) for _ in range(4)))
        answers = [r.as_numpy("logits").tolist() for r in results]

        async def requests():
            for i in range(2):
                yield {"model_name": model, "inputs": [tensor], "request_id": f"aio-stream-{i}"}

        streamed = []
        async for result, error in client.stream_infer(requests()):
            streamed.append({"error": str(error)} if error else {"id": result.get_response().id, "logits": result.as_numpy("logits").tolist()})
            if len(streamed) == 2:
                break
        return {"infer": answers, "stream": streamed}


def main():
    http_address, grpc_address, model, input_file, rows = sys.argv[1:6]
    x = np.fromfile(input_file, dtype="<f4").reshape(int(rows), 64)
    print(json.dumps({"http": http_checks(http_address, model, x), "grpc": grpc_checks(grpc_address, model, x)}))


if __name__ == "__main__":
    main()
