"""KServe's Python ModelServer serving the bench's ONNX models with onnxruntime (bench/peers.ts
starts it). Configured as KServe's docs advise for throughput on one host: one model server per
host, `workers` uvicorn processes for REST (here 2, one per core, each with its own sessions of one
intra-op thread), the Open Inference Protocol over REST and gRPC. KServe's request batcher is a
sidecar of its Kubernetes agent, not part of the ModelServer, so there is no batching here.

Roles:
  predictor: models "mlp" ([N,64] -> [N,10]), "cnn" ([N,3,224,224]) and "pipe" (the MLP: the second step).
  transformer: model "pipe", KServe's two-step form: its preprocess runs the first step (link,
    [N,64] -> [N,64]) and the ModelServer sends the result to the predictor's "pipe" over
    REST (Open Inference Protocol), as an InferenceService's transformer calls its predictor.

usage: kserve_server.py predictor HTTP_PORT GRPC_PORT MLP CNN WORKERS
       kserve_server.py transformer HTTP_PORT GRPC_PORT LINK PREDICTOR_HOST:PORT
"""
import sys

import numpy as np
import onnxruntime as ort
from kserve import InferInput, InferOutput, InferRequest, InferResponse, Model, ModelServer
from kserve.model import PredictorConfig


def session(path):
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    return ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])


class OnnxModel(Model):
    def __init__(self, name, path):
        super().__init__(name)
        self.path = path
        self.load()

    def load(self):
        self.session = session(self.path)
        self.input = self.session.get_inputs()[0].name
        self.ready = True
        return self.ready

    # With workers > 1 the ModelServer pickles its models into each uvicorn worker process; a
    # session cannot be pickled, so each worker opens its own.
    def __getstate__(self):
        state = dict(self.__dict__)
        state.pop("session", None)
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self.load()

    def predict(self, payload: InferRequest, headers=None, response_headers=None) -> InferResponse:
        x = payload.inputs[0].as_numpy()
        (logits,) = self.session.run(None, {self.input: x})
        output = InferOutput(name="logits", shape=list(logits.shape), datatype="FP32")
        output.set_data_from_numpy(logits, binary_data=True)
        return InferResponse(model_name=self.name, infer_outputs=[output], response_id=payload.id or "")


class FirstStep(OnnxModel):
    """The transformer: runs the first step, then the ModelServer calls the predictor with its answer."""

    predict = Model.predict

    def preprocess(self, payload: InferRequest, headers=None) -> InferRequest:
        x = payload.inputs[0].as_numpy()
        (hidden,) = self.session.run(None, {self.input: x})
        tensor = InferInput(name="x", shape=list(hidden.shape), datatype="FP32")
        tensor.set_data_from_numpy(hidden.astype(np.float32), binary_data=False)
        return InferRequest(model_name="pipe", infer_inputs=[tensor], request_id=payload.id)


def main():
    role, http_port, grpc_port = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    if role == "predictor":
        mlp, cnn, workers = sys.argv[4], sys.argv[5], int(sys.argv[6])
        models = [OnnxModel("mlp", mlp), OnnxModel("cnn", cnn), OnnxModel("pipe", mlp)]
        ModelServer(http_port=http_port, grpc_port=grpc_port, workers=workers, enable_latency_logging=False).start(models)
    else:
        link, predictor = sys.argv[4], sys.argv[5]
        config = PredictorConfig(predictor_host=predictor, predictor_protocol="v2")
        ModelServer(http_port=http_port, grpc_port=grpc_port, workers=1, enable_latency_logging=False, predictor_config=config).start(
            [FirstStep("pipe", link)]
        )


if __name__ == "__main__":
    main()
