/**
 * The model's forward pass runs as one graph per batch (`Kernels.beginGraph`):
 * its logits must equal, bit for bit, those of the same kernels called one by
 * one, at every thread count, for every weight type, with steps both below and
 * above the kernels' parallel thresholds.
 */
import assert from "node:assert/strict";
import { GgmlType } from "../src/gguf/types.ts";
import { Kernels } from "../src/kernels/mod.ts";
import { Context, type ForwardOps, Model } from "../src/model/mod.ts";
import { loadNative } from "../src/native/mod.ts";
import { syntheticModel, type SyntheticShape } from "./_synthetic.ts";

const native = loadNative();
const PROMPT = [1, 5, 9, 77, 3, 100, 42, 8, 19, 64, 11, 2];

/** Big enough that prefill matmuls and attention run in parallel, decode steps partly not. */
const SHAPE: SyntheticShape = {
  embd: 256,
  heads: 8,
  kvHeads: 2,
  ff: 512,
  vocab: 160,
  layers: 2,
  context: 64,
};

/** The same kernels without graphs: every call runs (and dispatches) on its own. */
function oneByOne(k: Kernels): ForwardOps {
  return {
    threadCount: k.threadCount,
    reserve: (tokens, cols) => k.reserve(tokens, cols),
    matmul: (...a) => k.matmul(...a),
    rmsnorm: (...a) => k.rmsnorm(...a),
    rope: (...a) => k.rope(...a),
    storeKv: (...a) => k.storeKv(...a),
    attention: (...a) => k.attention(...a),
    swiglu: (...a) => k.swiglu(...a),
    add: (...a) => k.add(...a),
    getRows: (...a) => k.getRows(...a),
    close: () => k.close(),
  };
}

function logitsOf(type: number, kernels: ForwardOps): Float32Array[] {
  const s = syntheticModel(native, { type, shape: SHAPE, seed: 3 });
  try {
    // Repacked weights run on the library's kernels only (not on the one-by-one wrapper).
    const repack = kernels instanceof Kernels;
    using model = new Model(native, s.gguf, s.base, undefined, undefined, { repack });
    using context = new Context(model, { kernels });
    const out = [context.forward(PROMPT, 0).slice()];
    for (let i = 0; i < 4; i++) out.push(context.forward([i + 20], PROMPT.length + i).slice());
    return out;
  } finally {
    s.memory.free();
  }
}

Deno.test("graph: logits equal the kernels called one by one, at 1..3 threads, every type", () => {
  for (const type of [GgmlType.F32, GgmlType.F16, GgmlType.BF16, GgmlType.Q8_0]) {
    using single = new Kernels(native, 1);
    const expected = logitsOf(type, oneByOne(single));
    for (const threads of [1, 2, 3]) {
      using kernels = new Kernels(native, threads);
      const actual = logitsOf(type, kernels);
      for (let step = 0; step < expected.length; step++) {
        assert.deepEqual(
          actual[step],
          expected[step],
          `type ${type}, ${threads} threads, step ${step}`,
        );
      }
    }
  }
});

Deno.test("graph: a bad call while recording throws and records nothing", () => {
  using kernels = new Kernels(native, 2);
  const a = native.alloc(1024);
  try {
    kernels.beginGraph();
    assert.throws(() => kernels.add(a.address, a.address, a.address, 0), RangeError);
    kernels.cancelGraph();
    // Not recording any more: the call runs at once.
    a.f32().fill(1);
    kernels.add(a.address, a.address, a.address, 256);
    assert.equal(a.f32()[255], 2);
    assert.throws(() => kernels.endGraph(), /without beginGraph/);
  } finally {
    a.free();
  }
});
