# Writes test/fixtures/gguf/blocks.gguf (one tensor of each float and block type, random blocks with
# finite scales) and blocks.json (gguf-py's numpy dequantization of each: the reference for
# src/io/gguf.ts). Run with gguf-py installed (pip install gguf):
#   python3 test/gen/gguf_fixtures.py
import json, os
import numpy as np
import gguf
from gguf import GGMLQuantizationType as Q

here = os.path.dirname(os.path.abspath(__file__))
out = os.path.join(here, '..', 'fixtures', 'gguf')
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(0)

# byte offsets of each block type's float16 fields (d, and m / dmin), which random bytes could make
# infinite or NaN
F16_FIELDS = {Q.Q8_0: [0], Q.Q4_0: [0], Q.Q4_1: [0, 2], Q.Q5_0: [0], Q.Q5_1: [0, 2], Q.Q2_K: [80, 82],
              Q.Q3_K: [108], Q.Q4_K: [0, 2], Q.Q5_K: [0, 2], Q.Q6_K: [208]}
w = gguf.GGUFWriter(os.path.join(out, 'blocks.gguf'), 'llama')
expected = {}
for qt in [Q.F32, Q.F16, Q.BF16, Q.Q8_0, Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1, Q.Q2_K, Q.Q3_K, Q.Q4_K, Q.Q5_K, Q.Q6_K]:
    block, size = gguf.GGML_QUANT_SIZES[qt]
    rows, cols = 2, 512
    nblocks = rows * cols // block
    if qt in (Q.F32, Q.F16):
        vals = rng.standard_normal((rows, cols)).astype(np.float32 if qt == Q.F32 else np.float16)
        raw = vals.view(np.uint8).reshape(rows, -1)
    else:
        raw = rng.integers(0, 256, size=(nblocks, size), dtype=np.uint8)
        if qt == Q.BF16:
            f = rng.standard_normal(nblocks).astype(np.float32)
            raw = (f.view(np.uint32) >> 16).astype(np.uint16).view(np.uint8).reshape(nblocks, size)
        for off in F16_FIELDS.get(qt, []):
            raw[:, off:off + 2] = rng.uniform(-1, 1, nblocks).astype(np.float16).view(np.uint8).reshape(nblocks, 2)
        raw = raw.reshape(rows, -1)
    name = f't_{qt.name}'
    w.add_tensor(name, raw, raw_shape=raw.shape, raw_dtype=qt) if qt not in (Q.F32, Q.F16) else w.add_tensor(name, vals)
    deq = gguf.quants.dequantize(raw, qt).astype(np.float32).reshape(-1)
    expected[name] = {'type': qt.name, 'shape': [rows, cols], 'values': [float(x) for x in deq]}
w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
with open(os.path.join(out, 'blocks.json'), 'w') as f:
    json.dump({'generator': 'test/gen/gguf_fixtures.py', 'gguf_py': getattr(gguf, '__version__', 'unknown'), 'tensors': expected}, f)
print('wrote', out)

# The llama fixture model (test/fixtures/models/llama) converted as llama.cpp's convert_hf_to_gguf.py
# does it: its tensor names, Q and K rows permuted for its rotary layout, metadata from config.json;
# once all float32, once with Q8_0 wherever a row is a multiple of 32 (the rest float32).
def read_safetensors(path):
    with open(path, 'rb') as f:
        n = int.from_bytes(f.read(8), 'little')
        head = json.loads(f.read(n))
        data = f.read()
    out = {}
    for k, v in head.items():
        if k == '__metadata__':
            continue
        a, b = v['data_offsets']
        out[k] = np.frombuffer(data[a:b], dtype=np.float32).reshape(v['shape'])
    return out

def permute(w, n_head):
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)

src = os.path.join(here, '..', 'fixtures', 'models', 'llama')
cfg = json.load(open(os.path.join(src, 'config.json')))
sd = read_safetensors(os.path.join(src, 'model.safetensors'))
H, KVH = cfg['num_attention_heads'], cfg['num_key_value_heads']
names = {'model.embed_tokens.weight': 'token_embd.weight', 'model.norm.weight': 'output_norm.weight', 'lm_head.weight': 'output.weight'}
per_layer = {'input_layernorm': 'attn_norm', 'self_attn.q_proj': 'attn_q', 'self_attn.k_proj': 'attn_k', 'self_attn.v_proj': 'attn_v',
             'self_attn.o_proj': 'attn_output', 'post_attention_layernorm': 'ffn_norm', 'mlp.gate_proj': 'ffn_gate', 'mlp.up_proj': 'ffn_up', 'mlp.down_proj': 'ffn_down'}
for i in range(cfg['num_hidden_layers']):
    for hf, gg in per_layer.items():
        names[f'model.layers.{i}.{hf}.weight'] = f'blk.{i}.{gg}.weight'
for variant in ['f32', 'q8_0']:
    w = gguf.GGUFWriter(os.path.join(out, f'llama-{variant}.gguf'), 'llama')
    w.add_block_count(cfg['num_hidden_layers']); w.add_context_length(cfg['max_position_embeddings'])
    w.add_embedding_length(cfg['hidden_size']); w.add_feed_forward_length(cfg['intermediate_size'])
    w.add_head_count(H); w.add_head_count_kv(KVH); w.add_layer_norm_rms_eps(cfg['rms_norm_eps'])
    w.add_rope_freq_base(cfg['rope_parameters']['rope_theta']); w.add_key_length(cfg['head_dim']); w.add_value_length(cfg['head_dim'])
    w.add_bos_token_id(cfg['bos_token_id']); w.add_eos_token_id(cfg['eos_token_id'])
    for hf, gg in names.items():
        t = sd[hf]
        if gg.endswith('attn_q.weight'):
            t = permute(t, H)
        elif gg.endswith('attn_k.weight'):
            t = permute(t, KVH)
        if variant == 'q8_0' and t.ndim == 2 and t.shape[1] % 32 == 0:
            q = gguf.quants.quantize(t, Q.Q8_0)
            w.add_tensor(gg, q, raw_shape=q.shape, raw_dtype=Q.Q8_0)
        else:
            w.add_tensor(gg, np.ascontiguousarray(t, dtype=np.float32))
    w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
print('wrote the llama fixture as GGUF')

# The byte-level BPE fixture tokenizer (test/fixtures/tokenizers/bytelevel, Llama 3's pre-tokenizer) as
# llama.cpp stores a 'gpt2'-model tokenizer in GGUF metadata (no tensors).
tok_dir = os.path.join(here, '..', 'fixtures', 'tokenizers', 'bytelevel')
tj = json.load(open(os.path.join(tok_dir, 'tokenizer.json')))
tc = json.load(open(os.path.join(tok_dir, 'tokenizer_config.json')))
vocab = tj['model']['vocab']
added = {a['id']: a for a in tj['added_tokens']}
n = max(max(vocab.values()), max(added)) + 1
tokens, types = [''] * n, [1] * n
for t, i in vocab.items():
    tokens[i] = t
for i, a in added.items():
    tokens[i] = a['content']; types[i] = 3 if a['special'] else 4
ids = {a['content']: a['id'] for a in tj['added_tokens']}
w = gguf.GGUFWriter(os.path.join(out, 'tokenizer-bytelevel.gguf'), 'llama')
w.add_tokenizer_model('gpt2'); w.add_tokenizer_pre('llama-bpe')
w.add_token_list(tokens); w.add_token_types(types)
w.add_token_merges([' '.join(m) if isinstance(m, list) else m for m in tj['model']['merges']])
w.add_bos_token_id(ids[tc['bos_token']]); w.add_eos_token_id(ids[tc['eos_token']]); w.add_pad_token_id(ids[tc['pad_token']])
w.add_add_bos_token(True)
w.add_chat_template(tc['chat_template'])
w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
print('wrote the byte-level tokenizer as GGUF metadata')

# The byte-fallback fixture tokenizer (test/fixtures/tokenizers/bytefallback) as llama.cpp stores a
# SentencePiece ('llama' model) tokenizer: pieces, scores (here: -id, so merges are recovered from
# them as for a file without merges), token types; and the ids transformers' GGUF loader gives for the
# fixture texts with the tokenizer it rebuilds from that file (the reference for src/models/load_gguf.ts).
bf_dir = os.path.join(here, '..', 'fixtures', 'tokenizers', 'bytefallback')
tj = json.load(open(os.path.join(bf_dir, 'tokenizer.json')))
vocab = tj['model']['vocab']
pieces = [''] * len(vocab)
for t, i in vocab.items():
    pieces[i] = t
ptypes = [6 if (p.startswith('<0x') and p.endswith('>') and len(p) == 6) else 1 for p in pieces]
ptypes[vocab['<unk>']] = 2; ptypes[vocab['<s>']] = 3; ptypes[vocab['</s>']] = 3
w = gguf.GGUFWriter(os.path.join(out, 'tokenizer-spm.gguf'), 'llama')
w.add_tokenizer_model('llama')
w.add_token_list(pieces); w.add_token_scores([float(-i) for i in range(len(pieces))]); w.add_token_types(ptypes)
w.add_bos_token_id(vocab['<s>']); w.add_eos_token_id(vocab['</s>']); w.add_unk_token_id(vocab['<unk>'])
w.add_add_bos_token(True)
w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
try:
    from transformers import AutoTokenizer
    ref = AutoTokenizer.from_pretrained(out, gguf_file='tokenizer-spm.gguf')
    for gguf_name, src_dir in [('tokenizer-spm', bf_dir), ('tokenizer-bytelevel', tok_dir)]:
        ref = AutoTokenizer.from_pretrained(out, gguf_file=f'{gguf_name}.gguf')
        texts = [c['text'] for c in json.load(open(os.path.join(src_dir, 'cases.json')))['cases']]
        json.dump({'generator': 'test/gen/gguf_fixtures.py', 'transformers': __import__('transformers').__version__,
                   'cases': [{'text': t, 'ids': ref(t)['input_ids'], 'decoded': ref.decode(ref(t)['input_ids'], skip_special_tokens=True)} for t in texts]},
                  open(os.path.join(out, f'{gguf_name}.json'), 'w'), ensure_ascii=False)
    print('wrote transformers ids for the GGUF tokenizers')
except ImportError:
    print('transformers not installed: tokenizer-spm.json not written')
