"""A Python client of Troupe's gRPC inference service, with stubs compiled from proto/ by
grpc_tools (test/integration/grpc-python.test.ts runs it): the health, metadata and config
calls, one ModelInfer with raw contents and one with typed contents, and one request on
ModelStreamInfer. Prints what it got as one JSON object.

usage: grpc_infer.py ADDRESS MODEL INPUT_FILE ROWS   (INPUT_FILE: ROWS x 64 float32, little-endian)
"""
import json
import struct
import sys

import grpc

import grpc_service_pb2 as pb
import grpc_service_pb2_grpc as rpc


def main():
    address, model, input_file, rows = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    with open(input_file, "rb") as f:
        raw = f.read()
    values = list(struct.unpack("<%df" % (len(raw) // 4), raw))
    out = {}
    with grpc.insecure_channel(address) as channel:
        stub = rpc.GRPCInferenceServiceStub(channel)
        out["live"] = stub.ServerLive(pb.ServerLiveRequest()).live
        out["ready"] = stub.ServerReady(pb.ServerReadyRequest()).ready
        out["model_ready"] = stub.ModelReady(pb.ModelReadyRequest(name=model)).ready
        server = stub.ServerMetadata(pb.ServerMetadataRequest())
        out["server"] = {"name": server.name, "extensions": list(server.extensions)}
        meta = stub.ModelMetadata(pb.ModelMetadataRequest(name=model))
        out["inputs"] = [{"name": t.name, "datatype": t.datatype, "shape": list(t.shape)} for t in meta.inputs]
        config = stub.ModelConfig(pb.ModelConfigRequest(name=model)).config
        out["config"] = {"name": config.name, "platform": config.platform, "max_batch_size": config.max_batch_size}

        request = pb.ModelInferRequest(model_name=model, id="py-1")
        tensor = request.inputs.add(name="x", datatype="FP32", shape=[rows, 64])
        request.raw_input_contents.append(raw)
        answer = stub.ModelInfer(request)
        logits = answer.raw_output_contents[0]
        out["raw"] = {
            "id": answer.id,
            "shape": list(answer.outputs[0].shape),
            "logits": list(struct.unpack("<%df" % (len(logits) // 4), logits)),
        }

        typed = pb.ModelInferRequest(model_name=model)
        tensor = typed.inputs.add(name="x", datatype="FP32", shape=[rows, 64])
        tensor.contents.fp32_contents.extend(values)
        answer = stub.ModelInfer(typed)
        out["typed"] = list(answer.outputs[0].contents.fp32_contents)

        responses = list(stub.ModelStreamInfer(iter([request])))
        streamed = responses[0].infer_response.raw_output_contents[0]
        out["stream"] = {
            "error": responses[0].error_message,
            "logits": list(struct.unpack("<%df" % (len(streamed) // 4), streamed)),
        }

        try:
            stub.ModelInfer(pb.ModelInferRequest(model_name="nope"))
            out["missing"] = None
        except grpc.RpcError as err:
            out["missing"] = {"code": err.code().name, "details": err.details()}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
