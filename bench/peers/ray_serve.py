"""Ray Serve serving the bench's ONNX models with onnxruntime (bench/peers.ts starts it and stops it
with SIGTERM). Configured as Ray Serve's performance guide advises for throughput: a replica per
core (num_replicas=2, one intra-op thread each), `@serve.batch` on each model's call
(max_batch_size, batch_wait_timeout_s) and `max_ongoing_requests` high enough for the batches to
fill; Ray started on this host alone (num_cpus=2, no dashboard). The two-step pipeline is Ray
Serve's model composition: an ingress deployment that calls two deployments through their
DeploymentHandles.

Requests: POST /mlp, /cnn, /pipe with the input's float32 bytes (little-endian, rows x 64 or
rows x 3 x 224 x 224); the answer is the output's float32 bytes. Ray Serve has no tensor protocol of
its own, so the body is the tensor itself, the least work a Ray Serve app can do per request.

usage: ray_serve.py PORT MLP CNN LINK
"""
import signal
import sys
import time

import numpy as np
import onnxruntime as ort
import ray
from ray import serve
from starlette.requests import Request
from starlette.responses import Response


def session(path):
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    return ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])


class Onnx:
    """A model replica: calls are batched by @serve.batch and run as one session.run."""

    def __init__(self, path, features):
        self.session = session(path)
        self.input = self.session.get_inputs()[0].name
        self.features = features

    async def run(self, x):
        return await self.batched(x)

    @serve.batch(max_batch_size=32, batch_wait_timeout_s=0.002)
    async def batched(self, xs):
        sizes = [len(x) for x in xs]
        (out,) = self.session.run(None, {self.input: np.concatenate(xs)})
        return np.split(out, np.cumsum(sizes)[:-1])

    async def __call__(self, request: Request):
        body = await request.body()
        x = np.frombuffer(body, dtype="<f4").reshape((-1, *self.features))
        return Response((await self.run(x)).tobytes(), media_type="application/octet-stream")


@serve.deployment(num_replicas=2, max_ongoing_requests=64, ray_actor_options={"num_cpus": 0})
class Mlp(Onnx):
    pass


@serve.deployment(num_replicas=2, max_ongoing_requests=16, ray_actor_options={"num_cpus": 0})
class Cnn(Onnx):
    @serve.batch(max_batch_size=4, batch_wait_timeout_s=0.005)
    async def batched(self, xs):
        sizes = [len(x) for x in xs]
        (out,) = self.session.run(None, {self.input: np.concatenate(xs)})
        return np.split(out, np.cumsum(sizes)[:-1])


@serve.deployment(num_replicas=1, max_ongoing_requests=64, ray_actor_options={"num_cpus": 0})
class Step(Onnx):
    pass


@serve.deployment(num_replicas=1, max_ongoing_requests=64, ray_actor_options={"num_cpus": 0})
class Pipe:
    def __init__(self, first, second):
        self.first = first
        self.second = second

    async def __call__(self, request: Request):
        x = np.frombuffer(await request.body(), dtype="<f4").reshape(-1, 64)
        hidden = await self.first.run.remote(x)
        return Response((await self.second.run.remote(hidden)).tobytes(), media_type="application/octet-stream")


def main():
    port, mlp, cnn, link = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    serve.start(http_options={"host": "127.0.0.1", "port": port}, logging_config={"log_level": "WARNING", "enable_access_log": False})
    serve.run(Mlp.bind(mlp, [64]), name="mlp", route_prefix="/mlp")
    serve.run(Cnn.bind(cnn, [3, 224, 224]), name="cnn", route_prefix="/cnn")
    first = Step.options(name="step1").bind(link, [64])
    second = Step.options(name="step2").bind(mlp, [64])
    serve.run(Pipe.bind(first, second), name="pipe", route_prefix="/pipe")
    print("ray serve ready", flush=True)
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    while not stop:
        time.sleep(0.2)
    serve.shutdown()
    ray.shutdown()


if __name__ == "__main__":
    main()
