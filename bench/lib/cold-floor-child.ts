// The floor of a cold start, in a fresh process: load onnxruntime-node, create the session, run one
// call, report how long that took after the process began. argv: MODEL INPUT_NAME SHAPE_JSON
import ort from 'onnxruntime-node';

const [model, name, shape] = process.argv.slice(2);
const dims = JSON.parse(shape!) as number[];
const session = await ort.InferenceSession.create(model!, { intraOpNumThreads: 1 });
const size = dims.reduce((a, b) => a * b, 1);
await session.run({ [name!]: new ort.Tensor('float32', new Float32Array(size).fill(0.25), dims) });
process.send!({ ms: performance.timeOrigin + performance.now() }, () => process.exit(0));
