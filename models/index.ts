/** Public surface of `troupe/models`: reproducible ONNX model generation. */
export { GraphBuilder, attr, decodeModel } from './onnx-builder.js';
export type { Attr, Attrs, DType, Dim, ModelOptions, TensorData, TensorSpec } from './onnx-builder.js';
export { Rng, heUniform, lecunUniform, normalArray, uniformArray } from './random.js';
export { boundaryTensor, emitModel, emitStages } from './layered.js';
export type { Layer, LayerRange, LayeredModel } from './layered.js';
export { convOutSize, convWeights, denseWeights, emitActivation, emitConv, emitDense, emitPoolClassifier } from './layers.js';
export type { Activation, ConvWeights, DenseWeights, Init } from './layers.js';
export { DEFAULT_SEED, MOBILENET_V2_CONFIG, buildMlp, buildMobileNetV2Like, buildSmallCnn } from './zoo.js';
export type { BuiltModel, MlpModel, MlpOptions, MobileNetV2Options, SmallCnnOptions } from './zoo.js';
export { buildRowSum } from './utility.js';
export { writeExampleModels } from './write.js';
export type { ExampleModelPaths } from './write.js';
export { CHAR_RNN_HIDDEN, CHAR_VOCAB, buildCharRnn, charText, charTokens } from './char-rnn.js';
export type { CharRnnModel, CharRnnOptions } from './char-rnn.js';
