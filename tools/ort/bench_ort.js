// Times onnxruntime (CPU) on one ONNX model and one .npy input, for
// bench/bench_onnx.cc. Usage: node bench_ort.js MODEL.onnx INPUT.npy RUNS [EXPECTED.npy]
// Prints "ort_ms_per_run=<mean>" and, with EXPECTED, "ort_max_abs_diff=<d>".
'use strict';
const fs = require('fs');
const ort = require('onnxruntime-node');

// Minimal reader for little-endian float32 C-order .npy files (v1/v2).
function readNpyF32(path) {
  const buf = fs.readFileSync(path);
  const major = buf[6];
  const hlen = major === 1 ? buf.readUInt16LE(8) : buf.readUInt32LE(8);
  const start = (major === 1 ? 10 : 12) + hlen;
  const header = buf.toString('latin1', major === 1 ? 10 : 12, start);
  if (!header.includes("'<f4'") || header.includes("'fortran_order': True"))
    throw new Error(path + ': expected little-endian float32 in C order');
  const shape = header.match(/'shape': \(([^)]*)\)/)[1].split(',')
      .map((s) => s.trim()).filter((s) => s.length).map(Number);
  const data = new Float32Array(buf.buffer.slice(buf.byteOffset + start, buf.byteOffset + buf.length));
  return {shape, data};
}

async function main() {
  const [model, input, runsArg, expected] = process.argv.slice(2);
  const runs = Number(runsArg || 5);
  const session = await ort.InferenceSession.create(model, {executionProviders: ['cpu']});
  const x = readNpyF32(input);
  const feeds = {[session.inputNames[0]]: new ort.Tensor('float32', x.data, x.shape)};
  let out = await session.run(feeds);  // warm-up
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < runs; ++i) out = await session.run(feeds);
  const ms = Number(process.hrtime.bigint() - t0) / 1e6 / runs;
  console.log('ort_ms_per_run=' + ms.toFixed(3));
  if (expected) {
    const y = readNpyF32(expected).data;
    const got = out[session.outputNames[0]].data;
    let d = 0;
    for (let i = 0; i < y.length; ++i) d = Math.max(d, Math.abs(got[i] - y[i]));
    console.log('ort_max_abs_diff=' + d);
  }
}
main().catch((e) => { console.error(e.message); process.exit(1); });
