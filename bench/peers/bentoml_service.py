"""BentoML services serving the bench's ONNX models with onnxruntime (bench/peers.ts runs
`bentoml serve bentoml_service:NAME` for each). Configured as BentoML's docs advise for throughput:
two workers per service (one per core, each with its own session of one intra-op thread) and
adaptive batching on the model APIs (batchable=True, max_batch_size, max_latency_ms). The two-step
pipeline is BentoML's service composition: Pipe calls two services it depends on
(bentoml.depends), each in processes of its own.

Requests: BentoML's own IO, JSON: POST /predict {"x": [[...64 floats...], ...]} (an ndarray input
is a JSON array; BentoML has no binary tensor encoding for a JSON API); the answer is the output as a
JSON array. Model files come from PEER_MLP, PEER_CNN and PEER_LINK.
"""
import os

import bentoml
import numpy as np
import onnxruntime as ort


def session(path):
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    return ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])


class Onnx:
    path_variable = ""

    def __init__(self):
        self.session = session(os.environ[self.path_variable])
        self.input = self.session.get_inputs()[0].name

    def run(self, x):
        (out,) = self.session.run(None, {self.input: x.astype(np.float32)})
        return out


@bentoml.service(workers=2, traffic={"max_concurrency": 128})
class Mlp(Onnx):
    path_variable = "PEER_MLP"

    @bentoml.api(batchable=True, max_batch_size=64, max_latency_ms=1000)
    def predict(self, x: np.ndarray) -> np.ndarray:
        return self.run(x)


@bentoml.service(workers=2, traffic={"max_concurrency": 32})
class Cnn(Onnx):
    path_variable = "PEER_CNN"

    @bentoml.api(batchable=True, max_batch_size=4, max_latency_ms=5000)
    def predict(self, x: np.ndarray) -> np.ndarray:
        return self.run(x)


@bentoml.service(workers=1)
class Step1(Onnx):
    path_variable = "PEER_LINK"

    @bentoml.api(batchable=True, max_batch_size=64, max_latency_ms=1000)
    def predict(self, x: np.ndarray) -> np.ndarray:
        return self.run(x)


@bentoml.service(workers=1)
class Step2(Onnx):
    path_variable = "PEER_MLP"

    @bentoml.api(batchable=True, max_batch_size=64, max_latency_ms=1000)
    def predict(self, x: np.ndarray) -> np.ndarray:
        return self.run(x)


@bentoml.service(workers=1, traffic={"max_concurrency": 128})
class Pipe:
    first = bentoml.depends(Step1)
    second = bentoml.depends(Step2)

    @bentoml.api
    async def predict(self, x: np.ndarray) -> np.ndarray:
        hidden = await self.first.to_async.predict(x)
        return await self.second.to_async.predict(hidden)
