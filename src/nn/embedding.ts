// nn.Embedding: a lookup table of `num_embeddings` rows of size `embedding_dim`. forward goes through
// forward_native (nbx.nn.functional.embedding) so a fused path can replace `forward` later unseen by models.

import { Tensor } from '../tensor/tensor.js';
import { embedding } from '../ops/indexing.js';
import { ShapeError, UnsupportedError, ValueError } from '../errors.js';
import { Module, checkDims, emptyParameter, pyRepr, type FactoryOptions } from './module.js';
import { constant_, normal_ } from './init.js';

export interface EmbeddingOptions extends FactoryOptions {
  /** This row is initialized to zeros (PyTorch also keeps its gradient zero; there is no training here). */
  padding_idx?: number | null;
  /** Not supported (PyTorch renormalizes rows in place during forward): a typed error when set. */
  max_norm?: number | null;
  norm_type?: number;
  scale_grad_by_freq?: boolean;
  sparse?: boolean;
  /** Use this tensor as the weight (the module takes ownership) instead of a fresh N(0, 1) one. */
  _weight?: Tensor | null;
}

export class Embedding extends Module {
  readonly num_embeddings: number;
  readonly embedding_dim: number;
  readonly padding_idx: number | null;
  readonly max_norm: number | null;
  readonly norm_type: number;
  readonly scale_grad_by_freq: boolean;
  readonly sparse: boolean;
  declare weight: Tensor;

  constructor(num_embeddings: number, embedding_dim: number, opts: EmbeddingOptions = {}) {
    super();
    const op = 'nn.Embedding';
    checkDims(op, { num_embeddings, embedding_dim });
    let p = opts.padding_idx ?? null;
    if (p !== null) {
      if (!Number.isInteger(p) || p >= num_embeddings || p < -num_embeddings) throw new ValueError(op, `Padding_idx must be within num_embeddings (got ${p} for num_embeddings=${num_embeddings})`);
      if (p < 0) p += num_embeddings;
    }
    if (opts.max_norm !== undefined && opts.max_norm !== null) {
      throw new UnsupportedError(op, 'max_norm is not supported: PyTorch renormalizes the weight rows in place during forward; renormalize the weight once beforehand instead');
    }
    this.num_embeddings = num_embeddings;
    this.embedding_dim = embedding_dim;
    this.padding_idx = p;
    this.max_norm = null;
    this.norm_type = opts.norm_type ?? 2.0;
    this.scale_grad_by_freq = opts.scale_grad_by_freq ?? false;
    this.sparse = opts.sparse ?? false;
    const given = opts._weight ?? null;
    if (given) {
      if (given.ndim !== 2 || given.shape[0] !== num_embeddings || given.shape[1] !== embedding_dim) {
        throw new ShapeError(op, `Shape of weight does not match num_embeddings and embedding_dim: weight is [${given.shape.join(', ')}], expected [${num_embeddings}, ${embedding_dim}]`);
      }
      this.register_parameter('weight', given);
    } else {
      this.register_parameter('weight', emptyParameter([num_embeddings, embedding_dim], opts));
      this.reset_parameters();
    }
  }

  /** Builds an Embedding around `embeddings` [num, dim] (which the module then owns), as PyTorch's from_pretrained. */
  static from_pretrained(embeddings: Tensor, opts: Omit<EmbeddingOptions, '_weight' | 'device' | 'dtype'> & { freeze?: boolean } = {}): Embedding {
    if (embeddings.ndim !== 2) throw new ShapeError('nn.Embedding.from_pretrained', 'Embeddings parameter is expected to be 2-dimensional');
    const { freeze: _freeze, ...rest } = opts;
    return new Embedding(embeddings.shape[0]!, embeddings.shape[1]!, { ...rest, _weight: embeddings });
  }

  /** PyTorch's initialization: N(0, 1), then the padding row zeroed. */
  reset_parameters(): void {
    const w = this._member('weight');
    if (!(w instanceof Tensor)) return;
    normal_(w);
    if (this.padding_idx !== null) {
      const row = w.select(0, this.padding_idx);
      constant_(row, 0);
      row.dispose();
    }
  }

  override forward(input: Tensor): Tensor { return this.forward_native(input); }
  /** The reference computation, nbx.nn.functional.embedding. */
  forward_native(input: Tensor): Tensor { return embedding(input, this.weight, this.padding_idx); }

  override extra_repr(): string {
    let s = `${this.num_embeddings}, ${this.embedding_dim}`;
    if (this.padding_idx !== null) s += `, padding_idx=${this.padding_idx}`;
    if (this.norm_type !== 2) s += `, norm_type=${pyRepr(this.norm_type)}`;
    if (this.scale_grad_by_freq) s += `, scale_grad_by_freq=True`;
    if (this.sparse) s += ', sparse=True';
    return s;
  }
}

