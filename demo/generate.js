// The page's text generation: the embedded model (assets/nbx-kjv, served next to the page as
// ./nbx-kjv/ — vite.config.mjs makes assets/ the public folder) fetched with nbx.models.loadFromUrl
// and streamed with model.stream() on WebGPU when the browser has an adapter, else on the CPU backend.
// Each run's text, token ids and timings are left in window.__nbxDemo.generation for tests.
import * as nbx from 'nbxtensor';

const MODEL_URL = './nbx-kjv/';
const $ = (id) => document.getElementById(id);

/** Lets the page paint between tokens: the CPU path never awaits anything that reaches the event loop. */
const nextTask = () => new Promise((resolve) => { const ch = new MessageChannel(); ch.port1.onmessage = () => resolve(); ch.port2.postMessage(null); });

/**
 * Sets up the generation section. `devices` lists what the page may run on, best first
 * (['webgpu', 'cpu'] with an adapter, ['cpu'] without).
 */
export function setupGeneration(devices) {
  const gen = { ready: false, busy: false, device: null, loadMs: null, model: MODEL_URL, runs: [], error: null };
  window.__nbxDemo.generation = gen;
  let model = null;

  const select = $('gen-device');
  for (const d of devices) select.append(new Option(d === 'webgpu' ? 'WebGPU' : 'CPU', d));
  const status = (s) => { $('gen-status').textContent = s; };
  const fail = (e) => {
    gen.error = `${e.name}: ${e.message}`;
    status(`error: ${gen.error}`);
    console.error(e);
  };

  async function loadModel(device) {
    gen.ready = false;
    $('gen-run').disabled = true;
    model?.dispose();
    model = null;
    status(`loading ${MODEL_URL} on ${device}…`);
    const t0 = performance.now();
    let fetched = 0;
    model = await nbx.models.loadFromUrl(MODEL_URL, {
      device,
      onDownload: (p) => {
        if (p.loadedBytes - fetched < (1 << 20) && p.loadedBytes !== p.totalBytes) return;
        fetched = p.loadedBytes;
        status(`downloading ${p.file}: ${(p.loadedBytes / 1e6).toFixed(1)}${p.totalBytes ? ` of ${(p.totalBytes / 1e6).toFixed(1)}` : ''} MB`);
      },
    });
    gen.loadMs = performance.now() - t0;
    gen.device = device;
    const params = model.parameters().reduce((n, t) => n + t.numel(), 0);
    status(`${model.config.model_type} model, ${(params / 1e6).toFixed(1)}M parameters, on ${device}: loaded in ${gen.loadMs.toFixed(0)} ms`);
    gen.ready = true;
    $('gen-run').disabled = false;
  }

  async function run() {
    if (!model || gen.busy) return;
    gen.busy = true;
    $('gen-run').disabled = true;
    const prompt = $('gen-prompt').value;
    const greedy = $('gen-greedy').checked;
    const seed = Number($('gen-seed').value);
    const maxNewTokens = Number($('gen-max').value);
    const record = { prompt, greedy, seed, maxNewTokens, device: gen.device, text: '', tokenIds: [], promptTokens: 0, ttftMs: null, tokensPerSec: null, gpu: null, done: false, error: null };
    gen.runs.push(record);
    const out = $('gen-output');
    out.textContent = prompt;
    const stamps = [];
    // on WebGPU, the work per token: dispatches, and pipelines compiled (none once the shapes repeat)
    const gpuStats = [];
    const t0 = performance.now();
    // transformers' streamer protocol: the prompt ids first, then each step's token
    const streamer = {
      put(ids) {
        if (ids.ndim === 2) { record.promptTokens = ids.shape[1]; return; }
        stamps.push(performance.now());
        if (gen.device === 'webgpu') gpuStats.push(nbx.webgpu.memoryStats());
        record.tokenIds.push(Number(ids.dataSync()[0]));
      },
      end() {},
    };
    try {
      const opts = { max_new_tokens: maxNewTokens, streamer, ...(greedy ? { do_sample: false } : { seed }) };
      for await (const piece of model.stream(prompt, opts)) {
        record.text += piece;
        out.textContent = prompt + record.text;
        await nextTask();
      }
      record.ttftMs = stamps[0] - t0;
      // decode speed: the tokens after the first over the time they took (the first includes the prompt)
      if (stamps.length > 1) record.tokensPerSec = (stamps.length - 1) / ((stamps.at(-1) - stamps[0]) / 1000);
      if (gpuStats.length > 1) {
        const [a, b, n] = [gpuStats[0], gpuStats.at(-1), gpuStats.length - 1];
        record.gpu = { dispatchesPerToken: (b.dispatches - a.dispatches) / n, newPipelines: (b.pipelines - a.pipelines) / n };
      }
      $('gen-stats').textContent = `${record.promptTokens} prompt tokens, first token after ${record.ttftMs.toFixed(0)} ms; `
        + `${stamps.length} tokens${record.tokensPerSec ? `, ${record.tokensPerSec.toFixed(1)} tokens/s after the first` : ''} on ${gen.device}`
        + (record.gpu ? ` (${record.gpu.dispatchesPerToken.toFixed(0)} GPU dispatches per token)` : '');
    } catch (e) {
      record.error = `${e.name}: ${e.message}`;
      $('gen-stats').textContent = `error: ${record.error}`;
      console.error(e);
    } finally {
      record.done = true;
      gen.busy = false;
      $('gen-run').disabled = false;
    }
  }

  $('gen-run').addEventListener('click', run);
  select.addEventListener('change', () => { loadModel(select.value).catch(fail); });
  $('gen-section').hidden = false;
  return loadModel(devices[0]).catch(fail);
}
