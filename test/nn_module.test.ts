// nbx.nn layers and Module against PyTorch: test/gen/nn_layers.py writes test/fixtures/nn/layers.json
// (torch 1.13: each layer's initial parameters under a seed, its forward and printout; the state_dict
// names of a nested model). Also the Module contract: load_state_dict's errors and modes, tied
// parameters, to(), dispose(), and empty (meta) construction. CPU only.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { inspect } from 'node:util';
import * as nbx from '../src/index.js';
import type { Tensor } from '../src/tensor/tensor.js';

const { nn } = nbx;

interface Enc { shape: number[]; dtype: string; data: number[] }
interface Case {
  name: string; seed: number | null; ctor: unknown[]; train: boolean; init: Record<string, Enc> | null;
  state: Record<string, Enc>; inputs: Enc[]; output: Enc; repr: string | null;
}
const fx = JSON.parse(readFileSync(new URL('../../test/fixtures/nn/layers.json', import.meta.url), 'utf8')) as {
  cases: Case[]; inits: { fn: string; shape: number[]; args: unknown[]; seed: number; out: Enc }[]; model: { state_dict: string[]; named_parameters: string[]; named_buffers: string[]; named_modules: string[]; repr: string };
};

const dec = (e: Enc): Tensor => nbx.tensor(e.data, { dtype: e.dtype as nbx.DTypeName }).reshape(e.shape);

function assertClose(got: Tensor, want: Enc, rtol: number, atol: number, what: string): void {
  assert.deepEqual([...got.shape], want.shape, `${what}: shape`);
  const g = got.dataSync() as ArrayLike<number | bigint>;
  for (let i = 0; i < want.data.length; i++) {
    const x = Number(g[i]!), y = want.data[i]!;
    assert.ok(Math.abs(x - y) <= atol + rtol * Math.abs(y), `${what}[${i}]: got ${x}, want ${y}`);
  }
}

/** Builds a layer from the fixture's description: [ClassName, ...args, options?]. */
function build(spec: unknown[]): nbx.nn.Module {
  const [name, ...args] = spec as [string, ...unknown[]];
  if (name === 'Sequential') return new nn.Sequential(...(args as unknown[][]).map(build));
  const Cls = (nn as unknown as Record<string, new (...a: unknown[]) => nbx.nn.Module>)[name];
  assert.ok(Cls, `nn.${name} exists`);
  return new Cls(...args);
}

for (const c of fx.cases) {
  test(`layer ${c.name} matches torch (init, forward, printout)`, () => {
    nbx.scope(() => {
      if (c.seed !== null) nbx.manual_seed(c.seed);
      const m = build(c.ctor);
      if (c.init) {
        // the same seed draws the same initial weights as torch (same generator, same order)
        const sd = m.state_dict();
        assert.deepEqual(Object.keys(sd), Object.keys(c.init), 'state_dict keys');
        for (const [k, e] of Object.entries(c.init)) assertClose(sd[k]!, e, 0, 0, `${c.name} init ${k}`);
      }
      m.load_state_dict(Object.fromEntries(Object.entries(c.state).map(([k, e]) => [k, dec(e)])));
      m.train(c.train);
      if (c.train) nbx.manual_seed(c.seed! + 1000);
      const out = m.forward(...c.inputs.map(dec)) as Tensor;
      assertClose(out, c.output, 1e-5, 1e-6, `${c.name} forward`);
      if (c.repr !== null) assert.equal(m.toString(), c.repr);
      m.dispose();
    });
  });
}

test('nn.init functions draw what torch draws for the same seed', () => {
  for (const c of fx.inits) {
    nbx.manual_seed(c.seed);
    const t = nbx.empty(c.shape);
    const fn = (nn.init as unknown as Record<string, (t: Tensor, ...a: unknown[]) => Tensor>)[c.fn]!;
    assert.equal(fn(t, ...c.args), t, `${c.fn} returns its argument`);
    assertClose(t, c.out, 1e-6, 0, c.fn);
  }
  assert.throws(() => nn.init.kaiming_uniform_(nbx.empty(3)), nbx.ValueError);
});

// The nested model of test/gen/nn_layers.py, written the way a PyTorch user writes it.
class Attn extends nn.Module {
  q_proj = new nn.Linear(4, 4, { bias: false });
  k_proj = new nn.Linear(4, 2);
  o_proj = new nn.Linear(4, 4, { bias: false });
  declare inv_freq: Tensor;
  constructor() {
    super();
    this.register_buffer('inv_freq', nbx.ones(2), { persistent: false });
  }
}
class Layer extends nn.Module {
  input_layernorm: nbx.nn.LayerNorm;
  self_attn: Attn;
  mlp: nbx.nn.Sequential;
  declare scale: Tensor;
  constructor() {
    super();
    this.input_layernorm = new nn.LayerNorm(4);
    this.self_attn = new Attn();
    this.mlp = new nn.Sequential(new nn.Linear(4, 8), new nn.SiLU(), new nn.Linear(8, 4));
    this.register_buffer('scale', nbx.ones(1));
  }
}
class Model extends nn.Module {
  embed_tokens = new nn.Embedding(11, 4);
  layers = new nn.ModuleList([new Layer(), new Layer()]);
  heads = new nn.ModuleDict<nbx.nn.Module>({ cls: new nn.Linear(4, 3), reg: new nn.Sequential({ proj: new nn.Linear(4, 1) }) });
  norm = new nn.LayerNorm(4, { elementwise_affine: false });
  lm_head = new nn.Linear(4, 11, { bias: false });
  constructor() {
    super();
    this.lm_head.weight = this.embed_tokens.weight; // tied, as PyTorch ties by assigning the Parameter
  }
}

test('names of a nested model match torch (state_dict, named_parameters/buffers/modules, printout)', () => {
  const m = new Model();
  assert.deepEqual(Object.keys(m.state_dict()), fx.model.state_dict);
  assert.deepEqual(m.named_parameters().map(([n]) => n), fx.model.named_parameters);
  assert.deepEqual(m.named_buffers().map(([n]) => n), fx.model.named_buffers);
  assert.deepEqual(m.named_modules().map(([n]) => n), fx.model.named_modules);
  assert.equal(m.toString(), fx.model.repr);
  assert.equal(inspect(m), fx.model.repr);
  assert.equal(m.parameters().length, fx.model.named_parameters.length);
  assert.deepEqual(m.layers.get(1).named_children().map(([n]) => n), ['input_layernorm', 'self_attn', 'mlp']);
  assert.equal(m.get_submodule('layers.1.self_attn.k_proj'), m.layers[1]!.self_attn.k_proj);
  assert.equal(m.get_parameter('layers.0.mlp.2.bias'), (m.layers.get(0).mlp.get(2) as nbx.nn.Linear).bias);
  m.dispose();
});

test('load_state_dict strict: missing, unexpected and mismatched keys in one StateDictError; nothing changes', () => {
  const m = new Model();
  const sd = { ...m.state_dict() };
  const before = m.layers[0]!.self_attn.q_proj.weight.tolist();
  delete sd['layers.1.mlp.0.bias'];
  delete sd['norm.weight']; // not a key at all (no affine): stays unexpected below
  const bad: Record<string, Tensor> = { ...sd, 'layers.0.self_attn.q_proj.weight': nbx.zeros(4, 4), 'layers.0.mlp.0.weight': nbx.zeros(8, 5),
    'heads.cls.bias': nbx.zeros(2), 'extra.weight': nbx.zeros(1), 'layers.7.scale': nbx.zeros(1) };
  let err: unknown;
  try { m.load_state_dict(bad); } catch (e) { err = e; }
  assert.ok(err instanceof nbx.StateDictError, `got ${String(err)}`);
  assert.ok(err instanceof nbx.NbxError);
  assert.deepEqual(err.missing, ['layers.1.mlp.0.bias']);
  assert.deepEqual(err.unexpected, ['extra.weight', 'layers.7.scale']);
  assert.deepEqual(err.mismatched, [
    { key: 'layers.0.mlp.0.weight', expected: [8, 4], got: [8, 5] },
    { key: 'heads.cls.bias', expected: [3], got: [2] },
  ]);
  assert.match(err.message, /Missing key\(s\) in state_dict: "layers\.1\.mlp\.0\.bias"/);
  assert.match(err.message, /Unexpected key\(s\) in state_dict: "extra\.weight", "layers\.7\.scale"/);
  assert.match(err.message, /size mismatch for heads\.cls\.bias: copying a param with shape \[2\] from checkpoint, the shape in current model is \[3\]/);
  assert.deepEqual(m.layers[0]!.self_attn.q_proj.weight.tolist(), before, 'a failed load changes nothing');

  // non-strict: missing/unexpected are returned (PyTorch's _IncompatibleKeys) ...
  const partial = { 'layers.0.self_attn.q_proj.weight': nbx.full([4, 4], 2), 'extra.bias': nbx.zeros(1) };
  const r = m.load_state_dict(partial, { strict: false });
  assert.deepEqual(r.unexpected_keys, ['extra.bias']);
  assert.equal(r.missing_keys.length, fx.model.state_dict.length - 1);
  assert.ok(!r.missing_keys.includes('layers.0.self_attn.q_proj.weight'));
  assert.deepEqual(m.layers[0]!.self_attn.q_proj.weight.tolist(), Array(4).fill([2, 2, 2, 2]));
  assert.ok(!partial['layers.0.self_attn.q_proj.weight'].isDisposed, 'copy semantics: the caller keeps its tensor');
  // ... but a shape mismatch is an error even then, as in PyTorch
  assert.throws(() => m.load_state_dict({ 'norm.weight': nbx.zeros(4), 'heads.cls.bias': nbx.zeros(5) }, { strict: false }),
    (e: unknown) => e instanceof nbx.StateDictError && e.mismatched.length === 1 && e.missing.length === 0 && e.unexpected.length === 0);
  assert.throws(() => m.load_state_dict({ 'norm.bias': 3 as unknown as Tensor }, { strict: false }), TypeError);
  const asMap = new Map(Object.entries(m.state_dict()).map(([k, v]) => [k, v.clone()]));
  assert.deepEqual(m.load_state_dict(asMap), { missing_keys: [], unexpected_keys: [] }, 'a Map loads too');
  m.dispose();
});

test('load_state_dict copies with conversion; assign installs the given tensors', () => {
  const lin = new nn.Linear(3, 2);
  const w64 = nbx.tensor([[1, 2, 3], [4, 5, 6]], { dtype: nbx.float64 });
  const b = nbx.tensor([0.5, -0.5]);
  const oldW = lin.weight;
  lin.load_state_dict({ weight: w64, bias: b });
  assert.equal(lin.weight, oldW, 'copy keeps the parameter object');
  assert.equal(lin.weight.dt, 'float32');
  assert.deepEqual(lin.weight.tolist(), [[1, 2, 3], [4, 5, 6]]);
  assert.ok(!w64.isDisposed && !b.isDisposed);

  const w2 = nbx.full([2, 3], 7, { dtype: nbx.float64 });
  lin.load_state_dict({ weight: w2, bias: b }, { assign: true });
  assert.equal(lin.weight, w2, 'assign installs the tensor object itself');
  assert.equal(lin.weight.dt, 'float64', 'assign keeps the given dtype, as PyTorch');
  assert.equal(lin.bias, b);
  assert.ok(oldW.isDisposed, 'the replaced parameter is freed');
  lin.dispose();
  assert.ok(w2.isDisposed && b.isDisposed, 'assign took ownership');
});

test('tied parameters: both names in state_dict, one parameter, shared through to() and loading, freed once', () => {
  const m = new Model();
  const sd = m.state_dict();
  assert.equal(sd['lm_head.weight'], sd['embed_tokens.weight']);
  assert.equal(m.named_parameters({ remove_duplicate: false }).length, fx.model.named_parameters.length + 1);
  m.to(nbx.float64);
  assert.equal(m.lm_head.weight, m.embed_tokens.weight, 'to() keeps the tie');
  assert.equal(m.lm_head.weight.dt, 'float64');
  // a checkpoint without the tied copy (transformers saves only embed_tokens.weight) loads strictly
  const ck = Object.fromEntries(Object.entries(m.state_dict()).filter(([k]) => k !== 'lm_head.weight').map(([k, v]) => [k, v.clone()]));
  const r = m.load_state_dict(ck, { assign: true });
  assert.deepEqual(r, { missing_keys: [], unexpected_keys: [] });
  assert.equal(m.lm_head.weight, ck['embed_tokens.weight'], 'the tie holds after assign');
  // the same tensor given under two names (a PyTorch state_dict of a tied model) is kept, not freed
  const both = { ...m.state_dict() };
  const w = nbx.randn(11, 4);
  both['embed_tokens.weight'] = w; both['lm_head.weight'] = w;
  m.load_state_dict(both, { assign: true });
  assert.equal(m.lm_head.weight, w);
  assert.ok(!w.isDisposed);
  m.dispose();
  assert.ok(w.isDisposed);
  // explicit tie API (works on empty modules too)
  const a = new nn.Embedding(5, 2), h = new nn.Linear(2, 5, { bias: false });
  h.tie_parameter('weight', a);
  assert.equal(h.weight, a.weight);
});

test('to(dtype) casts floating tensors only and frees the old storage; dispose frees everything once', () => {
  const m = new Model();
  m.layers[0]!.register_buffer('ids', nbx.arange(3));
  const oldW = m.layers[0]!.self_attn.q_proj.weight;
  const oldFreq = m.layers[0]!.self_attn.inv_freq;
  assert.equal(m.half(), m, 'returns this');
  assert.equal(m.layers[0]!.self_attn.q_proj.weight.dt, 'float16');
  assert.equal(m.layers[0]!.self_attn.inv_freq.dt, 'float16', 'non-persistent buffers move too');
  assert.equal(m.get_buffer('layers.0.ids').dt, 'int64', 'integer buffers keep their dtype');
  assert.ok(oldW.isDisposed && oldFreq.isDisposed, 'old storage freed');
  m.bfloat16().float();
  assert.equal(m.embed_tokens.weight.dt, 'float32');
  assert.throws(() => m.to(nbx.int32), nbx.DTypeError);
  assert.equal(m.to('cpu'), m);
  m.to(nbx.zeros([1], { dtype: nbx.float64 }));
  assert.equal(m.norm.training && m.layers[0]!.self_attn.k_proj.bias!.dt, 'float64', 'to(tensor) takes its dtype');
  m.float();

  const all = [...m.parameters({}), ...m.buffers(), m.lm_head.weight];
  m.dispose();
  for (const t of all) assert.ok(t.isDisposed, 'every parameter and buffer is freed');
  assert.ok(m.layers[1]!.self_attn.inv_freq.isDisposed);
  m.dispose(); // idempotent
  assert.throws(() => m.embed_tokens.forward(nbx.tensor([1])), nbx.DisposedError);
});

test('init_empty_weights: declared, not allocated; filled by load_state_dict (assign or copy)', () => {
  let ref!: Model;
  nbx.manual_seed(3);
  ref = new Model();
  const ck = Object.fromEntries(Object.entries(ref.state_dict()).filter(([k]) => k !== 'lm_head.weight'));

  const m = nn.init_empty_weights(() => new Model());
  const spec = m.state_dict_spec();
  assert.deepEqual(Object.keys(spec), fx.model.state_dict);
  assert.deepEqual(spec['layers.0.mlp.0.weight'], { kind: 'parameter', shape: [8, 4], dtype: 'float32', allocated: false });
  assert.equal(spec['layers.0.scale']!.allocated, true, 'buffers stay real by default (accelerate\'s include_buffers=False)');
  assert.throws(() => m.embed_tokens.weight, (e: unknown) => e instanceof nbx.MetaTensorError && /declared \[11, 4\] float32/.test((e as Error).message));
  assert.throws(() => m.state_dict(), nbx.MetaTensorError);
  assert.throws(() => m.named_parameters(), nbx.MetaTensorError);
  assert.throws(() => m.embed_tokens.forward(nbx.tensor([1])), nbx.MetaTensorError);
  assert.match(m.toString(), /Embedding\(11, 4\)/, 'printing works on an empty model');

  // wrong shapes are named with both shapes, and leave the module untouched
  const badCk = { ...ck, 'layers.1.self_attn.k_proj.weight': nbx.zeros(4, 4) };
  assert.throws(() => m.load_state_dict(badCk, { assign: true }), (e: unknown) => e instanceof nbx.StateDictError &&
    /size mismatch for layers\.1\.self_attn\.k_proj\.weight: copying a param with shape \[4, 4\] from checkpoint, the shape in current model is \[2, 4\]/.test((e as Error).message));
  assert.equal(m.state_dict_spec()['embed_tokens.weight']!.allocated, false);

  const given = Object.fromEntries(Object.entries(ck).map(([k, v]) => [k, v.clone()]));
  m.load_state_dict(given, { assign: true, strict: true });
  assert.equal(m.embed_tokens.weight, given['embed_tokens.weight']);
  assert.equal(m.lm_head.weight, m.embed_tokens.weight, 'tie made inside init_empty_weights holds');
  const x = nbx.randn(2, 4);
  assertClose(m.layers[1]!.mlp.forward(x), { shape: [2, 4], dtype: 'float32', data: [...(ref.layers[1]!.mlp.forward(x).dataSync() as Float32Array)] }, 0, 0, 'loaded forward');

  // copy mode after .to(dtype): the checkpoint is converted into the declared dtype, the caller keeps its tensors
  const m2 = nn.init_empty_weights(() => new Model()).to({ dtype: nbx.float64 });
  assert.equal(m2.state_dict_spec()['heads.cls.weight']!.dtype, 'float64');
  m2.load_state_dict(ck);
  assert.equal((m2.heads.get('cls') as nbx.nn.Linear).weight.dt, 'float64');
  assert.notEqual(m2.embed_tokens.weight, ck['embed_tokens.weight']);
  assert.ok(!ck['embed_tokens.weight']!.isDisposed);
  assert.equal(m2.lm_head.weight, m2.embed_tokens.weight);

  // a custom module registering a real tensor: replaced by its declaration, as accelerate does
  class Custom extends nn.Module {
    declare scale: Tensor;
    constructor() { super(); this.register_parameter('scale', nbx.ones(3)); }
  }
  const c = nn.init_empty_weights(() => new Custom());
  assert.deepEqual(c.state_dict_spec().scale, { kind: 'parameter', shape: [3], dtype: 'float32', allocated: false });
  // device: 'meta' on one layer
  const l = new nn.Linear(1000, 1000, { device: 'meta', dtype: nbx.bfloat16 });
  assert.deepEqual(l.state_dict_spec().weight, { kind: 'parameter', shape: [1000, 1000], dtype: 'bfloat16', allocated: false });
  assert.equal(l.toString(), 'Linear(in_features=1000, out_features=1000, bias=True)');
  ref.dispose(); m.dispose(); m2.dispose();
});

test('modules built inside nbx.scope keep their parameters', () => {
  const lin = nbx.scope(() => { const l = new nn.Linear(2, 2); l.forward(nbx.ones(1, 2)); return l; });
  assert.ok(!lin.weight.isDisposed && !lin.bias!.isDisposed);
  const m = nn.init_empty_weights(() => new nn.Linear(2, 2));
  nbx.scope(() => { m.load_state_dict({ weight: nbx.ones(2, 2), bias: nbx.zeros(2) }, { assign: true }); });
  assert.ok(!m.weight.isDisposed, 'assigned tensors leave the scope with the module');
});

test('train/eval, apply, containers, registration rules', () => {
  const m = new Model();
  assert.equal(m.training, true);
  m.eval();
  assert.ok(m.modules().every((x) => !x.training));
  m.train();
  assert.ok(m.layers[1]!.mlp.training);
  const seen: string[] = [];
  new nn.Sequential(new nn.ReLU(), new nn.Tanh()).apply((x) => seen.push(x._get_name()));
  assert.deepEqual(seen, ['ReLU', 'Tanh', 'Sequential']);

  const list = new nn.ModuleList<nbx.nn.Module>([new nn.ReLU(), new nn.Tanh()]);
  list.append(new nn.Sigmoid()).insert(1, new nn.SiLU());
  assert.deepEqual([...list].map((x) => x._get_name()), ['ReLU', 'SiLU', 'Tanh', 'Sigmoid']);
  assert.equal(list.length, 4);
  assert.equal(list.get(-1)._get_name(), 'Sigmoid');
  assert.equal(list.pop(0)._get_name(), 'ReLU');
  assert.deepEqual(list.named_children().map(([n]) => n), ['0', '1', '2']);
  assert.throws(() => list.get(3), nbx.IndexError);
  assert.equal(list.toString(), 'ModuleList(\n  (0): SiLU()\n  (1): Tanh()\n  (2): Sigmoid()\n)');

  const d = m.heads;
  assert.deepEqual(d.keys(), ['cls', 'reg']);
  assert.ok(d.has('reg') && !d.has('x'));
  assert.throws(() => d.set('keys', new nn.ReLU()), nbx.ValueError, 'a name that is a method is refused, as PyTorch');
  assert.throws(() => new nn.Linear(2, 2).register_parameter('a.b', null), nbx.ValueError);
  assert.throws(() => new nn.Linear(2, 2).register_buffer('weight', nbx.ones(1)), nbx.ValueError);
  assert.throws(() => new nn.Conv2d(2, 2, 3, { padding_mode: 'reflect' }), nbx.UnsupportedError);
  assert.throws(() => new nn.Conv2d(3, 2, 3, { groups: 2 }), nbx.ValueError);
  assert.throws(() => new nn.Embedding(4, 2, { max_norm: 1 }), nbx.UnsupportedError);
  assert.throws(() => new nn.Dropout(1.5), nbx.ValueError);
  assert.throws(() => new nn.Module().forward(), nbx.ValueError);
  const lin = new nn.Linear(2, 2);
  lin.register_parameter('bias', null);
  assert.equal(lin.bias, null);
  assert.deepEqual(Object.keys(lin.state_dict()), ['weight'], 'a null parameter is not in state_dict');
  class Clobber extends nn.Linear { override weight = undefined as unknown as Tensor; }
  assert.throws(() => new Clobber(2, 2), TypeError, 'a field declaration over a parameter fails loudly (use `declare`)');
  assert.equal(new nn.LayerNorm([2, 3], { bias: false }).toString(), 'LayerNorm((2, 3), eps=1e-05, elementwise_affine=True)');
  assert.equal(new nn.RMSNorm(8, { eps: 1e-6 }).toString(), 'RMSNorm((8,), eps=1e-06, elementwise_affine=True)');
  m.dispose();
});

// The same layers on the GPU backends that are present, against the CPU; skipped with a message otherwise.
const devices: [string, string | false][] = [
  ['webgpu', await nbx.webgpu.probe().then((p) => (p.available ? false : `no WebGPU adapter (${p.reason})`))],
  ['cuda', nbx.cuda.is_available() ? false : 'no CUDA device'],
];
for (const [dev, skip] of devices) {
  if (skip) process.stdout.write(`# nn layers on ${dev} NOT RUN: ${skip}\n`);
  test(`layers on ${dev} match the CPU (module.to, device option, load_state_dict, dispose)`, { skip }, async () => {
    nbx.manual_seed(7);
    const cpu = new nn.Sequential(new nn.Linear(6, 8), new nn.GELU({ approximate: 'tanh' }), new nn.LayerNorm(8), new nn.SiLU(), new nn.RMSNorm(8, { eps: 1e-6 }), new nn.Linear(8, 4, { bias: false }));
    const x = nbx.randn(3, 6);
    const want = cpu.forward(x) as Tensor;
    const gpu = new nn.Sequential(new nn.Linear(6, 8, { device: dev }), new nn.GELU({ approximate: 'tanh' }), new nn.LayerNorm(8, { device: dev }),
      new nn.SiLU(), new nn.RMSNorm(8, { eps: 1e-6, device: dev }), new nn.Linear(8, 4, { bias: false, device: dev }));
    gpu.load_state_dict(cpu.state_dict()); // copies CPU tensors onto the device
    const got = gpu.forward(x.to(dev)) as Tensor;
    assert.equal(got.device.type, dev);
    const w = [...(want.dataSync() as Float32Array)];
    const g = [...(await got.data() as Float32Array)];
    g.forEach((v, i) => assert.ok(Math.abs(v - w[i]!) <= 1e-5 + 1e-4 * Math.abs(w[i]!), `${dev}[${i}]: ${v} vs ${w[i]}`));

    const emb = new nn.Embedding(9, 4, { padding_idx: 0 });
    const conv = new nn.Conv2d(2, 3, 3, { padding: 1 });
    const ids = nbx.tensor([[0, 3, 8]]), img = nbx.randn(1, 2, 5, 5);
    const e0 = emb.forward(ids), c0 = conv.forward(img);
    emb.to(dev); conv.to(dev);
    const e1 = await emb.forward(ids.to(dev)).data(), c1 = await conv.forward(img.to(dev)).data();
    assert.deepEqual([...(e1 as Float32Array)], [...(e0.dataSync() as Float32Array)]);
    const c0d = c0.dataSync() as Float32Array;
    (c1 as Float32Array).forEach((v, i) => assert.ok(Math.abs(v - c0d[i]!) <= 1e-5 + 1e-4 * Math.abs(c0d[i]!), `${dev} conv2d[${i}]`));
    // an empty module moved to the device: a copying load lands there, in the declared dtype
    for (const empty of [nn.init_empty_weights(() => new nn.Linear(6, 8)).to(dev), nn.init_empty_weights(() => new nn.Linear(6, 8, { device: dev }))]) {
      empty.load_state_dict({ weight: nbx.randn(8, 6, { dtype: nbx.float64 }), bias: nbx.zeros(8) });
      assert.equal(empty.weight.device.type, dev);
      assert.equal(empty.weight.dt, 'float32');
      empty.dispose();
    }
    const params = [...gpu.parameters(), ...emb.parameters(), ...conv.parameters()];
    assert.ok(params.every((p) => p.device.type === dev));
    gpu.dispose(); emb.dispose(); conv.dispose();
    assert.ok(params.every((p) => p.isDisposed));
  });
}
