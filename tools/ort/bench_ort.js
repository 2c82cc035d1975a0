// Times onnxruntime (CPU) on one ONNX model, for bench/bench_onnx.cc.
// Usage: node bench_ort.js MODEL.onnx RUNS OUTPUT.npy INPUT.npy...
// The inputs feed the graph inputs in order; the first graph output of the
// last run is written to OUTPUT.npy (so the caller can compare its own
// result). Prints "ort_ms_per_run=<mean>" and "ort_best_ms=<fastest run>".
'use strict';
const fs = require('fs');
const ort = require('onnxruntime-node');

// .npy element types this reader and writer handle, by descr.
const kTypes = {
  '<f4': {ort: 'float32', array: Float32Array},
  '<i8': {ort: 'int64', array: BigInt64Array},
  '<i4': {ort: 'int32', array: Int32Array},
};

// Minimal reader for little-endian C-order .npy files (v1/v2).
function readNpy(path) {
  const buf = fs.readFileSync(path);
  const major = buf[6];
  const hlen = major === 1 ? buf.readUInt16LE(8) : buf.readUInt32LE(8);
  const start = (major === 1 ? 10 : 12) + hlen;
  const header = buf.toString('latin1', major === 1 ? 10 : 12, start);
  if (header.includes("'fortran_order': True")) throw new Error(path + ': Fortran order');
  const descr = header.match(/'descr': '([^']*)'/)[1];
  const type = kTypes[descr];
  if (!type) throw new Error(path + ': element type ' + descr + ' is not read here');
  const shape = header.match(/'shape': \(([^)]*)\)/)[1].split(',')
      .map((s) => s.trim()).filter((s) => s.length).map(Number);
  const bytes = buf.buffer.slice(buf.byteOffset + start, buf.byteOffset + buf.length);
  return new ort.Tensor(type.ort, new type.array(bytes), shape);
}

function writeNpy(path, tensor) {
  const descr = Object.keys(kTypes).find((d) => kTypes[d].ort === tensor.type);
  if (!descr) throw new Error('output type ' + tensor.type + ' is not written here');
  const dims = tensor.dims.length === 1 ? tensor.dims[0] + ',' : tensor.dims.join(', ');
  let header = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (" + dims + '), }';
  // Pad so that the data starts at a multiple of 64 bytes, ending in '\n'.
  header += ' '.repeat(63 - ((10 + header.length) % 64)) + '\n';
  const head = Buffer.alloc(10);
  head.write('\x93NUMPY', 0, 'latin1');
  head[6] = 1;
  head[7] = 0;
  head.writeUInt16LE(header.length, 8);
  const data = Buffer.from(tensor.data.buffer, tensor.data.byteOffset, tensor.data.byteLength);
  fs.writeFileSync(path, Buffer.concat([head, Buffer.from(header, 'latin1'), data]));
}

async function main() {
  const [model, runsArg, output, ...inputs] = process.argv.slice(2);
  if (!model || !output || inputs.length === 0)
    throw new Error('usage: node bench_ort.js MODEL.onnx RUNS OUTPUT.npy INPUT.npy...');
  const runs = Number(runsArg || 5);
  const session = await ort.InferenceSession.create(model, {executionProviders: ['cpu']});
  if (inputs.length !== session.inputNames.length)
    throw new Error(model + ' takes ' + session.inputNames.length + ' inputs, got ' + inputs.length);
  const feeds = {};
  session.inputNames.forEach((name, i) => { feeds[name] = readNpy(inputs[i]); });
  let out = await session.run(feeds);  // warm-up
  let total = 0, best = Infinity;
  for (let i = 0; i < runs; ++i) {
    const t0 = process.hrtime.bigint();
    out = await session.run(feeds);
    const ms = Number(process.hrtime.bigint() - t0) / 1e6;
    total += ms;
    best = Math.min(best, ms);
  }
  console.log('ort_ms_per_run=' + (total / runs).toFixed(3));
  console.log('ort_best_ms=' + best.toFixed(3));
  writeNpy(output, out[session.outputNames[0]]);
}
main().catch((e) => { console.error(e.message); process.exit(1); });
