"""KServe's Python clients (kserve, pinned in test/python/requirements.txt) against a Troupe head:
InferenceRESTClient with the Open Inference Protocol ("v2") and InferenceGRPCClient, each with
binary (raw) tensors and with JSON/typed ones, its health calls, and a model name Troupe does not
serve. test/integration/python-clients.test.ts runs it with the interpreter of .venv-clients/ and
checks what it prints (one JSON object).

usage: kserve_clients.py HTTP_URL GRPC_HOST:PORT MODEL INPUT_FILE ROWS
       (INPUT_FILE: ROWS x 64 float32, little-endian)
"""
import asyncio
import json
import sys

import grpc
import httpx
import numpy as np
from kserve import InferenceGRPCClient, InferenceRESTClient, InferInput, InferRequest, RESTConfig


def request(model, x, binary, request_id):
    tensor = InferInput(name="x", shape=list(x.shape), datatype="FP32")
    tensor.set_data_from_numpy(x, binary_data=binary)
    return InferRequest(model_name=model, infer_inputs=[tensor], request_id=request_id)


def logits_of(response):
    return {"id": response.id, "logits": next(o for o in response.outputs if o.name == "logits").as_numpy().tolist()}


async def rest(url, model, x):
    out = {}
    client = InferenceRESTClient(RESTConfig(protocol="v2", retries=0, timeout=60))
    try:
        out["live"] = await client.is_server_live(url)
        out["ready"] = await client.is_server_ready(url)
        out["model_ready"] = await client.is_model_ready(url, model)
        out["binary"] = logits_of(await client.infer(url, request(model, x, True, "rest-binary"), model_name=model))
        out["json"] = logits_of(await client.infer(url, request(model, x, False, "rest-json"), model_name=model))
        try:
            await client.infer(url, request("nope", x, True, "rest-missing"), model_name="nope")
            out["missing"] = None
        except httpx.HTTPStatusError as err:
            out["missing"] = {"status": err.response.status_code, "body": err.response.json()}
    finally:
        await client.close()
    return out


async def grpc_calls(address, model, x):
    out = {}
    client = InferenceGRPCClient(url=address, timeout=60)
    try:
        out["live"] = await client.is_server_live()
        out["ready"] = await client.is_server_ready()
        out["model_ready"] = await client.is_model_ready(model)
        out["binary"] = logits_of(await client.infer(request(model, x, True, "grpc-raw")))
        out["typed"] = logits_of(await client.infer(request(model, x, False, "grpc-typed")))
        try:
            await client.infer(request("nope", x, True, "grpc-missing"))
            out["missing"] = None
        except grpc.RpcError as err:
            out["missing"] = {"code": err.code().name, "details": err.details()}
    finally:
        await client.close()
    return out


async def main():
    url, address, model, input_file, rows = sys.argv[1:6]
    x = np.fromfile(input_file, dtype="<f4").reshape(int(rows), 64)
    print(json.dumps({"rest": await rest(url, model, x), "grpc": await grpc_calls(address, model, x)}))


if __name__ == "__main__":
    asyncio.run(main())
