// Hopper (sm_90a) prefill attention: FlashAttention-3's structure on warpgroup MMA.
//
// Chosen by src/backend/cuda/kernels/attention.ts when the driver reports compute capability 9.0 and
// the device profile's matrix unit is `wgmma` (data, not the card's name); the mma.sync kernel stays
// for every other card, for float32 and under the tuner as the other candidate.
//
// A work item is BLOCK_M = 128 query rows of one (batch, head); a block has three warpgroups (384 threads)
// and runs one item, or (persistent) one block per SM takes items from a global counter until none is left
// (the items ordered heaviest causal tiles first within groups of heads whose K/V fit in L2):
// * warpgroup 0, the producer (`setmaxnreg.dec`). TMA build (the default where the driver encodes the
//   descriptors: 16-byte aligned base and strides): one thread issues every load as tensor-memory-accelerator
//   boxes (`cp.async.bulk.tensor`, descriptors from cuTensorMapEncodeTiled passed by value as a
//   __grid_constant__ parameter): per item Q, then the K and V tiles of BLOCK_N keys into a ring of `stages`
//   slots, each completing on its full barrier by transaction bytes (`mbarrier.arrive.expect_tx`); rows
//   past the end arrive as zeros. No copy passes through registers or the generic proxy, and the other
//   127 threads exit. Persistent: the next item's Q loads once both consumers finished their last Q·Kᵀ
//   (Q-empty barrier), while they finish P·V and write O; the item's index travels to the consumers in
//   shared memory with its Q (an index past the end: no more work); ring slots and phases count tiles over
//   the block's items. cp.async build (inputs TMA cannot address): the 128 threads copy 16-byte chunks and
//   each issues `cp.async.mbarrier.arrive.noinc` on the slot's barrier (performed once its copies landed);
//   at the end they wait until the consumers released the last V (every deferred arrival counted).
//   Either way the producer never waits for its own copies, so up to `stages` tiles are in flight.
//   K and V have their own full and empty barriers, and V lags K by one tile (load order K(t), V(t-1)),
//   as the consumers use them: a slot's K is refilled as soon as Q·Kᵀ of its tile is done, before the
//   softmax, while its V is still being read. Consumers release a slot with one arrival per warp.
// * warpgroups 1 and 2, the consumers (`setmaxnreg.inc`), 64 query rows each, FlashAttention-3's
//   intra-warpgroup overlap: iteration t issues S(t) = Q·K(t)ᵀ (`wgmma m64nBNk16`, both operands in shared
//   memory, K-major) and then O += P(t-1)·V(t-1) (`wgmma m64nDk16`, P from registers, V an N-major shared
//   operand, so V needs no transpose), waits for S(t) alone (`wgmma.wait_group 1`), runs the softmax of
//   tile t while P·V(t-1) is still on the tensor cores, then waits for it, packs P(t) (the accumulator
//   layout of S is the register-A layout of m64k16, so P is S rounded in place) and rescales O. Live
//   registers: S, O and P (BN/2 + D/2 + BN/4 per thread), so BLOCK_N 128 fits at D 128. The two consumer
//   warpgroups are scheduled independently, so one's softmax also runs under the other's MMAs.
//   Chained items (persistent config chain): one loop over the tiles of all the block's items, the item
//   boundary a step like any other (the next item's Q·K(0)ᵀ issued with the last P·V of the previous one, whose
//   O is stored once that is done); Q then has two buffers, so the producer never waits for Q to be released.
// Synchronisation, by construction: every mbarrier has one phase per use of its slot, in tile order (t
// counts the block's tiles over its items); a waiter waits for phase ⌊t/stages⌋ of slot t mod stages (parity = its low bit), and no barrier can run
// two phases ahead of a waiter: a slot's full barrier is re-armed only after both consumer warpgroups
// released the slot (empty barrier), which each does only after waiting on its full barrier, and the
// producer waits on an empty barrier only for the phase the previous fill of that slot opened. The
// consumers of one block have the same tile count (uniform branches), no named barriers are used and
// nobody waits on the producer's exit. Deadlock freedom at 2 slots: a consumer waiting on K(t) needs
// both consumers past S(t-2), a warpgroup that lags behind waits only on tiles the other has released.
// NBX_ATTENTION_WATCH=1 compiles every wait with a 4-second limit (then it prints which barrier, tile,
// block and thread, and traps): a hang becomes a launch error that names its wait (device checks).
// Shared memory tiles are [D/64][rows][64] (128-byte rows, 16-byte chunks XOR-swizzled by row mod 8:
// the hardware's 128B swizzle, so every descriptor is a canonical SW128 layout; tiles 1024-aligned).
// Numerics: fp32 accumulators, online softmax in base 2 with scale·log2(e) folded in, P rounded to the
// input dtype, a row that sees no key gives 0 (as the mma.sync kernel); the running max moves only when a
// tile's exceeds it by more than 8 (log2 units; O and the row sum share the stale max, so it is exact, and O
// is hardly ever rescaled), row max and sum over 4 partials (NBX_ATTENTION_SOFTMAX picks the older forms). The launch order (heaviest causal tiles first) is also the same.
//
// Under the host emulator (NBX_EMU) wgmma, mbarriers (with transaction counts), TMA loads (the emulated
// driver's descriptor layout, the 128B swizzle) and the proxy fences are emulated in C++ (the descriptors
// decoded as the PTX ISA's canonical layouts describe), so the tests run this kernel too.

import type { DTypeName } from '../../../dtype/dtypes.js';
import type { ArgType } from '../runtime/driver.js';
import { R } from '../runtime/backend.js';
import { UnsupportedError } from '../../../errors.js';

export type Sm90MaskKind = 'none' | 'bool' | DTypeName;

/**
 * blockN: keys per K/V tile (a multiple of 16); stages: ring slots; pingpong: the two consumer warpgroups
 * take turns issuing their MMAs (named barriers), so one's softmax runs while the other's MMAs do;
 * persistent (TMA builds): one block per SM walks the work items (batch·head, query tile), so a block's
 * next Q and K/V load while it finishes the previous item (no launch, prologue and tail per item);
 * deep: each consumer warpgroup issues Q·K(t+1)ᵀ into a second S before the softmax of tile t (two S
 * tiles live: BLOCK_N ≤ 96 at head dim 128), so its own MMAs cover its softmax (not with ping-pong);
 * chain (persistent): the consumers run one loop over the tiles of all their items, so an item's first
 * Q·Kᵀ and softmax run under the previous item's last P·V (two Q buffers), as any tile's do;
 * softmax: the form built (Sm90SourceOptions.softmax; default lazy; NBX_ATTENTION_SOFTMAX overrides it);
 * edge (causal problems; not with ping-pong, deep or chain): each consumer warpgroup stops at its own rows' causal edge.
 * A work item's tile count is that of its last row, so where BLOCK_N does not divide 64 evenly into the item's rows
 * (BLOCK_N 64, 96, 160, 80: not 128), warpgroup 0 (the item's first 64 rows) gets a last tile, or more, whose every key
 * lies past its rows: every score masked, P = 0, P·V adds 0. With edge it releases those slots unread (waiting on
 * each slot's full barrier first, so its arrivals on the empty barriers stay in the slot's phase order) and goes on
 * to its epilogue and next item while warpgroup 1 has the tensor cores. Same bits for finite inputs (a skipped P·V
 * adds exact zeros). Measured slower (attn-9, forced, TFLOP/s causal L4096 / non-causal / L1024): n160s2Pe 522 / 586 /
 * 338 against n160s2P 608 / 682 / 350, n144s2Pte 597 / 650 / 341 against n144s2Pt 613 / 683 / 354 — also non-causal,
 * where ntw = nt and nothing is skipped: the build's loop shape alone costs that (as the chained loop's did). Selectable
 * by force only.
 * split (persistent, not chained; tag k): the launcher may split the items of the last, partial round over their keys
 * (R0, PK: work items from R0 on are parts, PK per item, each a contiguous run of the item's K/V tiles). Since attn-11
 * (where this build ran 3-10% slower than the same tile unsplit, also where it split nothing) the launcher runs the split
 * build only on a tail of batch·heads, in a launch after the main one (which runs the unsplit build; attention.ts tailPlan). Items of equal
 * cost (not causal) on G blocks finish in ⌈items / G⌉ rounds: B4 H32 L4096 is 4,096 items on 132 SMs, 31.03 rounds of
 * work in 32 (4 items in the last round, 128 SMs idle for an item's time, 3%). A part writes its unnormalised O (fp32),
 * running max and row sum to a workspace slot and counts itself on its item's counter; the block that counts last merges
 * the item's PK slots in part order (the same bits whichever block merges: identical run to run) and resets the counter.
 * ostore (persistent; tag o): a whole item's O goes through a staging tile in shared memory (each warpgroup
 * its 64 rows, 32 conflict-free 4-byte shared stores per thread in the 128B-swizzled layout) and leaves in 16-byte stores,
 * a warp two whole 256-byte rows an instruction. The direct form's 4-byte global stores touch 8 rows (8 lines, ~8 L1
 * wavefronts) per warp instruction: ~2,000 wavefronts an item on the consumers' path; this form ~500 (shared and global).
 * (TMA stores would need O's descriptor: 16 more parameter words, past the launcher's 80.) Same bits.
 */
/**
 * The persistent kernel's L2 groups (a launch choice, not a build: the same kernel): items go out heaviest first within
 * groups of G batch·heads. 'l2' (the rule before the eleventh session): as many as fill half the L2 with their K and V, the
 * last group what is left; 'even': that count of groups, made equal; 'wide': K and V of a group up to 90% of the L2, groups
 * equal. attn-11 (forced, causal B8 H16 L1024, TFLOP/s): G 50 by 'l2' (groups of 50, 50, 28) n128s2Pt 384, n128s2Pto 389;
 * G 43 ('even') 410 / 413; G 64 ('wide') 406 / 419; G 128 (one group: K/V past the L2) 361 / 379.
 */
export type Sm90Group = 'l2' | 'even' | 'wide';
export const SM90_GROUPS: readonly Sm90Group[] = ['l2', 'even', 'wide'];

export interface Sm90Config { blockN: number; stages: number; pingpong?: boolean; persistent?: boolean; deep?: boolean; chain?: boolean; softmax?: Sm90Softmax; edge?: boolean; split?: boolean; ostore?: boolean; group?: Sm90Group }

/** A configuration's short name: n<BLOCK_N>s<stages>, p ping-pong, d deep, P persistent, C chained items, t tcsum, e each warpgroup's causal edge, k the last round's items split over their keys, o O stored through shared memory; -even / -wide the L2 group rule (Sm90Group). */
export const sm90Tag = (c: Sm90Config): string => `n${c.blockN}s${c.stages}${c.pingpong ? 'p' : ''}${c.deep ? 'd' : ''}${c.persistent ? 'P' : ''}${c.chain ? 'C' : ''}${c.softmax === 'tcsum' ? 't' : ''}${c.edge ? 'e' : ''}${c.split ? 'k' : ''}${c.ostore ? 'o' : ''}${c.group && c.group !== 'l2' ? `-${c.group}` : ''}`;

/** Query rows per block: two consumer warpgroups of 64 rows. */
export const SM90_BLOCK_M = 128;
export const SM90_THREADS = 384;
export const SM90_HEAD_DIMS = [64, 128, 256];

/** The configurations tried for head dim D (K/V tile and ring depth that fit 227 KiB of shared memory). */
// Registers per consumer thread: S BN/2 + O D/2 + P BN/4 (+ ~40 of addressing and statistics) under 232.
// Ping-pong where FlashAttention-3 uses it (head dims up to 128), against the same tile without.
export function sm90Configs(D: number): Sm90Config[] {
  // Kept after device call B of 2026-12-02 (BENCHMARKS.md, fifth session; every tile forced on the bench's
  // shapes): D256 n80s2 617 / n64s2 598 TFLOP/s (persistent n64 560); D128 n128s2 550 / n128s2p 537 causal,
  // 614 both non-causal, persistent n128s2pP 524 / 574 but 250 (as n128s2p) at L1024, while n176s2p 532,
  // n176s2pP 500 and n128s3pP 475 lost everywhere; D64 n128s3pP 349 / n128s3p 333 / n128s3 312.
  if (D === 256) return [{ blockN: 80, stages: 2 }, { blockN: 64, stages: 2 }];
  // Sixth session: the persistent variant takes its items from a counter (was a static round robin), with and
  // without ping-pong. Call 1 of 2026-12-03 (lazy softmax, tiles forced, TFLOP/s): causal L4096 n128s2 572,
  // n128s2p 555, n128s2P 540, n128s2pP 507; non-causal 665 / 547 / 596 / 540; causal L1024 308 / 329 / 365 / 341.
  // The deep schedule (seventh session; two S tiles live, BLOCK_N 96 at most at D 128) lost everywhere in call 2:
  // causal L4096 n96s3d 403, n96s3dP 450, n80s3d 430, n64s4d 413, n96s2d 446 against n128s2 574; non-causal 476-501
  // against 669; L1024 257-306 against n128s2P 372; D64 n128s3dP 366, n128s3d 345 against n128s3pP 384. Not offered.
  // Call 5 (forced, TFLOP/s; causal L4096 / non-causal / L1024 / GQA / f16): n128s2 577 / 672 / 299 / 588 / 569,
  // n128s2P 598 / 592 / 363 / 581 / 581, n160s2P 601 / 664 / 349 / 596 / 581, ping-pong n128s2p 498 / 560 / 324 /
  // 509 / 469 (dropped), n144s2 509 / 589, n160s2 476 / 554, n176s2 449 / 503 (BLOCK_N past 128 pays only persistent).
  // Eighth session, call 3 (figures in the commit that pruned the list): the chained forms (C) lost to the plain
  // persistent tiles on every D128 row and are offered at D64 only, as the one chained tile that won there; they
  // stay selectable by force. tcsum (t) measured mixed against lazy tile for tile, so it is a tile of its own.
  // Tenth session, attn-8 (forced, 0.3 s idle before each tile; causal L4096 / non-causal / L1024 / GQA / f16): n128s2 591 /
  // 687 / 323 / 594 / 577, n128s2P 614 / 676 / 383 / 619 / 596, n160s2P 622 / 692 / 353 / 625 / 599, n128s2Pt 627 / 691 /
  // 388 / 633 / 609 (the tuner's pick on all five rows); not offered: n96s2P 572 / 636 / 353, n96s3P 578 / 636 / 354, n64s3P
  // 480 / 529 / 326, n64s4P 485 / 534 / 321, n112s2P 564 / 648 / 344 (smaller K/V tiles lose, also at L1024).
  // attn-9 (same way; causal L4096 / non-causal / L1024): n128s2Pt 616 / 678 / 387, n160s2P 608 / 682 / 350; not offered:
  // n144s2Pt 613 / 683 / 354, n128s3P 610 / 670 / 379, and the edge forms (knob edge) n160s2Pe 522 / 586 / 338, n144s2Pte
  // 597 / 650 / 341 (slower by 5-14% even non-causal, where they skip nothing). n160s2Pt needs 238,688 bytes of shared
  // memory with the ones slabs (the limit is 232,448): listed by mistake in db1f4b1, its check entries failed to launch.
  if (D === 128) return [{ blockN: 128, stages: 2 }, { blockN: 128, stages: 2, persistent: true }, { blockN: 160, stages: 2, persistent: true },
    { blockN: 128, stages: 2, persistent: true, softmax: 'tcsum' }];
  // D64 (call 5): n192s2pP 411, n128s3pP 380, n128s3P 364, n128s3p 361, n160s3 332, n192s2 329 (SDPA 424-433)
  // Ninth session: n192s3pPC, the bench's D64 pick (n192s2pPC: 418 forced in attn-4, 422.6 in the attn-5 bench vs SDPA
  // 438.0) with a ring of 3 (181 KB of shared memory; a 24 KB K or V tile at D64 is short work for a step, so one
  // more tile in flight). Not yet timed: the tuner decides. nvcc 13 sm_90a: spills as n192s2pPC (none unmasked; 8-16
  // bytes with bool / float32 masks).
  // (n128s3P dropped in the tenth session: 354-364 in every forced timing against 400-434 for the n192 tiles)
  return [{ blockN: 192, stages: 2, pingpong: true, persistent: true }, { blockN: 128, stages: 3, pingpong: true, persistent: true },
    { blockN: 192, stages: 2, pingpong: true, persistent: true, chain: true }, { blockN: 192, stages: 3, pingpong: true, persistent: true, chain: true },
    // attn-8 (forced, causal L4096, 0.3 s idle before each): n192s2pP 406, n128s3pP 389, n128s3P 363, n192s2pPC 426,
    // n192s3pPC 418, n192s2pPCt 434 (SDPA 434.7 in the bench of the same call, whose pick n192s2pPC read 415.8)
    { blockN: 192, stages: 2, pingpong: true, persistent: true, chain: true, softmax: 'tcsum' }];
}

/**
 * Tiles the tuner offers besides sm90Configs(D) on the D128 problems that are not causal or are float16 (attention.ts:
 * the bench rows under SDPA in attn-5 there, while the causal bfloat16 rows at or over it keep their list as it is):
 * n128s2t, the non-persistent tile (the pick on both rows in attn-5: non-causal 673.3 vs 686.6, f16 564.7 vs 572.3)
 * with the row sums on the tensor cores. Same-pick bench pairs, lazy vs tcsum (n128s2P, second process): call 5
 * non-causal 655.5 -> 660.9, f16 575.5 -> 595.3; eighth session call 1 f16 590.9 -> 602.7; forced tile for tile
 * (attn-4) mixed (n128s2Pt vs n128s2P: non-causal 599 vs 625, f16 539 vs 532). n128s2t itself was never timed: the
 * tuner decides.
 */
export const sm90MoreConfigs = (D: number): Sm90Config[] => (D === 128 ? [{ blockN: 128, stages: 2, softmax: 'tcsum' }] : []);

/**
 * The tiles the tuner offers on one problem at head dim D (attention.ts): not causal, sm90Configs(D) and then
 * sm90MoreConfigs(D); causal, the persistent tiles of sm90Configs(D) alone where it has some (D 64, 128; D 256 has
 * none). Tenth session: every causal bench row that ran the non-persistent tile read 3-8% under the same row with a
 * persistent one (TFLOP/s, bench rows of sessions 7-9 with the tuner's pick): causal L4096 n128s2 565.8 / 573.8 vs
 * n128s2P / n160s2P 589.8-621.2; GQA 521.8 / 572.4 vs 547.7-626.2; f16 550.5 / 558.1 / 564.7 / 566.2 vs 575.5-608.1
 * (the f16 row was under SDPA exactly when the tuner took n128s2, 95.5-98.7%, and over it with n128s2P, 99.3-104.6%);
 * L1024 forced n128s2 299-315 vs n128s2P 363-372. The tuner's sweep took n128s2 there on 4-6% differences that the bench
 * rows never showed (the sweep timed it first, right after the warm-up of the same tile; see pickTuned).
 */
export function sm90Offered(D: number, causal: boolean): Sm90Config[] {
  const all = sm90Configs(D);
  const p = all.filter((c) => c.persistent);
  // attn-11 (forced, TFLOP/s): the split tiles lost on every row, also where they split nothing (their build: causal L1024
  // n128s2Pk 353 vs n128s2P 374; non-causal, where the 4 last items split 8 ways, 596 vs 659, n128s2Ptk 642 vs n128s2Pt
  // 665), as did the ostore forms (non-causal n128s2Po 627, n128s2Pto 648; causal L4096 571 / 593 vs 594 / 604; D64
  // n192s2pPCto 409 vs n192s2pPCt 435) but at L1024, where n128s2Pto was the tuner's pick (387-389 vs n128s2Pt 382-384;
  // with G 64 419 vs 406): of those only n128s2Pto stays offered (causal D128). Both stay selectable by force.
  const base = !causal ? [...all, ...sm90MoreConfigs(D)] : p.length ? p : all;
  const more = causal && D === 128 ? [{ blockN: 128, stages: 2, persistent: true, softmax: 'tcsum' as const, ostore: true }] : [];
  const tiles = [...base, ...more];
  // causal: each persistent tile under each L2 group rule (a launch choice: no more compiles). attn-12 (s11call3, forced,
  // TFLOP/s, l2 / even / wide): L1024 n128s2Pto 384 / 408 / 411, n128s2Pt 380 / 406 / 400; GQA n128s2Pt 608 / 626 / 623; D64
  // n192s2pPC 431 / 444 / 437; causal L4096 and f16 within 1% (n128s2Pt 602 / 602 / 598). Not causal the rules only moved
  // the figure down (n128s2P 651 / 648 / 612): the old rule alone. The split tiles, with the split build on the tail heads
  // alone in a second launch (attention.ts, tailPlan), gained nothing either in attn-13 (s11call4, forced non-causal:
  // n128s2Pk 646, n160s2Pk 645, n128s2Ptk 658 against n128s2P 653, n160s2P 651, n128s2Pt 661): selectable by force only.
  if (!causal) return tiles;
  return [...tiles.filter((c) => !c.persistent), ...tiles.filter((c) => c.persistent).flatMap((c) => SM90_GROUPS.map((group) => (group === 'l2' ? c : { ...c, group })))];
}
/** The persistent tiles of `cs` with O through shared memory (ostore, tag o; the tiles the check covers). */
export const sm90OStore = (cs: Sm90Config[]): Sm90Config[] => cs.filter((c) => c.persistent).map((c) => ({ ...c, ostore: true }));

/**
 * Not causal (items of equal cost), the persistent per-item tiles of sm90Configs(D) again with the last round's items split
 * over their keys (split, tag k; the launcher splits only where that round is partial). Eleventh session: not yet timed.
 */
export const sm90SplitConfigs = (D: number): Sm90Config[] => sm90Configs(D).filter((c) => c.persistent && !c.chain).map((c) => ({ ...c, split: true }));

/** Q buffers: two where items are chained (the next item's Q loads while the current one's is read), else one. */
export const sm90QSlots = (c: Sm90Config): number => (c.chain ? 2 : 1);
/**
 * Dynamic shared memory: Q (one or two buffers), the K/V ring, 1 KiB of alignment slack, the mbarriers (Q full and
 * empty per Q buffer; K/V full and empty per slot), persistent: the item index per Q buffer; ones (the tcsum softmax):
 * a 64-column slab of ones after each V slot.
 */
export const sm90Smem = (D: number, c: Sm90Config, ones = false): number => 2 * D * ((sm90QSlots(c) + (c.ostore ? 1 : 0)) * SM90_BLOCK_M + 2 * c.stages * c.blockN) + (ones ? 128 * c.stages * c.blockN : 0) + 1024 + 8 * (2 * sm90QSlots(c) + 4 * c.stages) + (c.persistent ? 16 : 0);
/** Whether softmax form sx sums the rows on the tensor cores at head dim D (tcsum: N = D + 8 ≤ 256). */
export const sm90Ones = (D: number, sx: Sm90Softmax | undefined): boolean => (sx ?? SM90_SOFTMAX_DEFAULT) === 'tcsum' && D + 8 <= 256;

/** Registers the consumers take from the producer (setmaxnreg; 40·128 + 232·256 = 168·384, the 384-thread launch bound; the producer spills below 40). */
const REG_PRODUCER = 40, REG_CONSUMER = 232;

/**
 * 2^x on the FMA pipes for x ≤ 8 (finite; below -125 it gives 2^-125, not 0, so only unmasked tiles use it):
 * x = n + f with n = round(x) (the 1.5·2^23 shift), 2^f on [-0.5, 0.5] by a degree-3 polynomial fitted for
 * relative error (7.5e-5, under half an ulp of float16 and bfloat16), n added to the exponent bits.
 */
const EXP2_FMA = `__device__ __forceinline__ float exp2_fma(float x) {
  x = fmaxf(x, -125.f);
  const float r = x + 12582912.f, f = x - (r - 12582912.f);
  const float p = fmaf(fmaf(fmaf(0.0551716685f, f, 0.242611155f), f, 0.693260968f), f, 0.999928057f);
  return __int_as_float(__float_as_int(p) + (__float_as_int(r) << 23));
}`;

/** Wait limit of the NBX_ATTENTION_WATCH build (ns of %globaltimer). */
const WATCH_NS = 4_000_000_000;
/** The warpgroup-MMA, mbarrier, cp.async and TMA helpers, device and emulator forms (also the Hopper grouped GEMM's, kernels/moe.ts). */
export function wgmmaHelpers(bf16: boolean, ns: number[]): string {
  const ty = bf16 ? 'bf16' : 'f16';
  const regs = (n: number, from: number): string => Array.from({ length: n }, (_, i) => `%${from + i}`).join(', ');
  const outs = (n: number, c = '+f'): string => Array.from({ length: n }, (_, i) => `"${c}"(d[${i}])`).join(', ');
  let dev = '', emu = '';
  for (const n of [...new Set(ns)]) {
    const nr = n / 2;
    // SS: A and B from shared memory, both K-major (trans 0)
    dev += `__device__ __forceinline__ void wg_ss${n}(float (&d)[${nr}], unsigned long long da, unsigned long long db, int scd) {
  asm volatile("{ .reg .pred p; setp.ne.b32 p, %${nr + 2}, 0;\\n"
    "wgmma.mma_async.sync.aligned.m64n${n}k16.f32.${ty}.${ty} {${regs(nr, 0)}}, %${nr}, %${nr + 1}, p, 1, 1, 0, 0; }"
    : ${outs(nr)} : "l"(da), "l"(db), "r"(scd));
}
// SS with D = A·B (scale-d false): d is written only, so the compiler never materialises its old
// values (copies into accumulator registers next to a wgmma make ptxas serialize, C7515)
__device__ __forceinline__ void wg_ss${n}z(float (&d)[${nr}], unsigned long long da, unsigned long long db) {
  asm volatile("{ .reg .pred p; setp.ne.b32 p, 0, 0;\\n"
    "wgmma.mma_async.sync.aligned.m64n${n}k16.f32.${ty}.${ty} {${regs(nr, 0)}}, %${nr}, %${nr + 1}, p, 1, 1, 0, 0; }"
    : ${outs(nr, '=f')} : "l"(da), "l"(db));
}
// RS: A (four packed pairs per thread, the m64k16 fragment) from registers, B from shared memory N-major (trans 1)
__device__ __forceinline__ void wg_rs${n}(float (&d)[${nr}], const u32 (&a)[4], unsigned long long db) {
  asm volatile("{ .reg .pred p; setp.eq.u32 p, 1, 1;\\n"
    "wgmma.mma_async.sync.aligned.m64n${n}k16.f32.${ty}.${ty} {${regs(nr, 0)}}, {%${nr}, %${nr + 1}, %${nr + 2}, %${nr + 3}}, %${nr + 4}, p, 1, 1, 1; }"
    : ${outs(nr)} : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db));
}
// orders the compiler's uses of d after the wait that completed the wgmma writing them
__device__ __forceinline__ void reg_fence${n}(float (&d)[${nr}]) {
  #pragma unroll
  for (int i = 0; i < ${nr}; i++) asm volatile("" : "+f"(d[i]) :: "memory");
}
`;
    emu += `inline void wg_ss${n}(float (&d)[${nr}], unsigned long long da, unsigned long long db, int scd) { emu90::mma<${n}>(d, da, db, nullptr, scd, false); }
inline void wg_ss${n}z(float (&d)[${nr}], unsigned long long da, unsigned long long db) { emu90::mma<${n}>(d, da, db, nullptr, 0, false); }
inline void wg_rs${n}(float (&d)[${nr}], const u32 (&a)[4], unsigned long long db) { emu90::mma<${n}>(d, 0, db, a, 1, true); }
inline void reg_fence${n}(float (&)[${nr}]) {}
`;
  }
  return String.raw`
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;
#ifdef NBX_EMU
#include <cstdint>
#include <cstdio>
#include <cstdlib>
namespace emu90 {
// shared-memory "addresses" are offsets from the 1 KiB boundary below the dynamic shared memory, so the
// swizzle (address bits 4-6 ^= bits 7-9) sees the same bits as on the device
inline char* origin() { return (char*)((uintptr_t)emu::dyn_smem & ~(uintptr_t)1023); }
inline u32 addr(const void* p) { return (u32)((const char*)p - origin()); }
inline float el(u16 v) { ${bf16 ? 'return __uint_as_float((u32)v << 16);' : 'return emu_h2f(v);'} }
// element (mn, k) of a 16-bit operand described by a SW128 descriptor; K-major (trans 0) or MN-major (trans 1)
inline float desc_el(u64 desc, int mn, int k, bool mnMajor) {
  const u32 start = (u32)(desc & 0x3fff) << 4, lbo = (u32)((desc >> 16) & 0x3fff) << 4, sbo = (u32)((desc >> 32) & 0x3fff) << 4;
  if ((desc >> 62) != 1) { fprintf(stderr, "emu90: only the 128B swizzle is emulated\n"); abort(); }
  u32 a = mnMajor ? start + (u32)(mn / 64) * lbo + (u32)(mn % 64) * 2 + (u32)(k / 8) * sbo + (u32)(k % 8) * 128
                  : start + (u32)(mn / 8) * sbo + (u32)(mn % 8) * 128 + (u32)k * 2;
  a ^= ((a >> 7) & 7) << 4;
  u16 v; memcpy(&v, origin() + a, 2); return el(v);
}
struct WG { int arrived = 0, gen = 0; u32 a[128][4]; };
inline WG wgs[8];
// a waiting thread parks as at a warp barrier: the emulator resumes such warps only once no thread is
// runnable (a thread that stayed runnable while spinning would keep warps at shuffles from ever being
// released). Every wait in this kernel is reached by all lanes of a warp together.
inline void spin(long long& n) { if (++n > 50000000LL) { fprintf(stderr, "emu90: wait never satisfied (deadlock)\n"); abort(); } emu::sync_warp(); }
inline void wg_sync(WG& w) {
  const int g = w.gen;
  if (++w.arrived == 128) { w.arrived = 0; w.gen++; return; }
  long long n = 0; while (w.gen == g) spin(n);
}
// one warpgroup-wide m64nNk16 MMA, done when issued (commit/wait are no-ops): each thread computes its
// own accumulator elements; A comes from shared memory or from the warpgroup's registers (exchanged)
template <int N> void mma(float* d, u64 da, u64 db, const u32* ar, int scd, bool rs) {
  const unsigned t = emu::lin_tid(), wt = t & 127, lane = wt & 31, w = wt >> 5;
  WG& G = wgs[(t >> 7) & 7];
  if (rs) { for (int i = 0; i < 4; i++) G.a[wt][i] = ar[i]; wg_sync(G); }
  auto A = [&](int r, int k) -> float {
    if (!rs) return desc_el(da, r, k, false);
    const int ww = r / 16, rr = r % 16, g = rr % 8, hi = rr / 8, kh = k / 8, kc = k % 8;
    const u32 v = G.a[ww * 32 + g * 4 + kc / 2][hi + 2 * kh];
    return el((u16)(v >> (16 * (kc % 2))));
  };
  for (int j = 0; j < N / 8; j++) for (int e = 0; e < 4; e++) {
    const int row = 16 * (int)w + (int)(lane >> 2) + (e >> 1) * 8, col = 8 * j + (int)(lane & 3) * 2 + (e & 1);
    float s = 0.f;
    for (int k = 0; k < 16; k++) s += A(row, k) * desc_el(db, col, k, rs);
    d[4 * j + e] = (scd ? d[4 * j + e] : 0.f) + s;
  }
  if (rs) wg_sync(G);
}
// 8 bytes, as the device's mbarrier object: arrivals expected and pending, the phase bit and the
// transaction bytes still expected (expect_tx raises them, a TMA load's completion lowers them)
struct Bar { u16 expected, pending; u32 phase : 1; u32 tx : 31; };
static_assert(sizeof(Bar) == 8, "mbarrier size");
inline Bar* bar(u32 a) { return (Bar*)(origin() + a); }
inline void settle(Bar* x) { if (x->pending == 0 && x->tx == 0) { x->pending = x->expected; x->phase ^= 1u; } }
}
__device__ __forceinline__ u32 smem_u32(const void* p) { return emu90::addr(p); }
__device__ __forceinline__ void mbar_init(u32 b, u32 n) { emu90::Bar* x = emu90::bar(b); x->expected = (u16)n; x->pending = (u16)n; x->phase = 0; x->tx = 0; }
__device__ __forceinline__ void mbar_arrive(u32 b) { emu90::Bar* x = emu90::bar(b); --x->pending; emu90::settle(x); }
__device__ __forceinline__ void mbar_arrive_tx(u32 b, u32 bytes) { emu90::Bar* x = emu90::bar(b); x->tx += bytes; --x->pending; emu90::settle(x); }
__device__ __forceinline__ void mbar_wait(u32 b, u32 parity, int, int) { long long n = 0; while (emu90::bar(b)->phase == parity) emu90::spin(n); }
// a 4-D tiled TMA load (box {64 elements, rows, 1, 1}) as the emulated driver encodes the descriptor
// (emu_driver.cpp: address, dims, byte strides, box, element bytes, swizzle): out-of-bounds elements 0,
// rows of 128 bytes swizzled as the hardware's 128B mode, then the barrier's transaction bytes lowered
__device__ __forceinline__ void tma_load4(u32 dst, const void* map, int c0, int c1, int c2, int c3, u32 b) {
  const u64* w = (const u64*)map; const u32* u = (const u32*)(w + 10);
  const u32 es = u[5], pitch = u[0] * es, rows = u[1];
  if (u[6] != 3 || pitch != 128) { fprintf(stderr, "emu90: only 128-byte rows with the 128B swizzle are emulated\n"); abort(); }
  const int cc[4] = {c0, c1, c2, c3};
  for (u32 r = 0; r < rows; r++) for (u32 e = 0; e < u[0]; e++) {
    long long off = 0; bool in = true;
    for (int d = 0; d < 4; d++) {
      const long long x = (long long)cc[d] + (d == 0 ? (long long)e : d == 1 ? (long long)r : 0LL);
      if (x < 0 || x >= (long long)w[1 + d]) { in = false; break; }
      off += d == 0 ? x * es : x * (long long)w[5 + d];
    }
    u32 a = dst + r * pitch + e * es;
    a ^= ((a >> 7) & 7) << 4;
    if (in) memcpy(emu90::origin() + a, (const char*)w[0] + off, es); else memset(emu90::origin() + a, 0, es);
  }
  emu90::Bar* x = emu90::bar(b); x->tx -= rows * pitch; emu90::settle(x);
}
// cp16 copies at once here, so this thread's copies have landed: the deferred arrival is an arrival now
__device__ __forceinline__ void cp_arrive(u32 b) { mbar_arrive(b); }
namespace emu90 { struct NB { int arrived = 0, gen = 0; }; inline NB nbs[16]; }
// named barrier id of n threads: bar.arrive counts, bar.sync counts and waits for the count
__device__ __forceinline__ void nb_arrive(int id, int n) { emu90::NB& x = emu90::nbs[id]; if (++x.arrived == n) { x.arrived = 0; x.gen++; } }
__device__ __forceinline__ void nb_sync(int id, int n) { emu90::NB& x = emu90::nbs[id]; const int g = x.gen; nb_arrive(id, n); long long k = 0; while (x.gen == g) emu90::spin(k); }
__device__ __forceinline__ void init_fence() {}
__device__ __forceinline__ void cp16(void* dst, const void* src, bool ok) { if (ok) memcpy(dst, src, 16); else memset(dst, 0, 16); }
__device__ __forceinline__ void cp_wait_all() {}
__device__ __forceinline__ void proxy_fence() {}
__device__ __forceinline__ void wg_arrive() {}
__device__ __forceinline__ void wg_commit() {}
template <int N> __device__ __forceinline__ void wg_wait() {}
template <int N> __device__ __forceinline__ void reg_dealloc() {}
template <int N> __device__ __forceinline__ void reg_alloc() {}
__device__ __forceinline__ u32 pack2(float lo, float hi) { return (u32)${bf16 ? 'nbx_f2bf' : 'nbx_f2h'}(lo) | ((u32)${bf16 ? 'nbx_f2bf' : 'nbx_f2h'}(hi) << 16); }
__device__ __forceinline__ float fexp2(float x) { return exp2f(x); }
${EXP2_FMA}
__device__ __forceinline__ float acc_zero() { return 0.f; }
${emu}
#else
__device__ __forceinline__ u32 smem_u32(const void* p) { return (u32)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void mbar_init(u32 b, u32 n) { asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(b), "r"(n)); }
__device__ __forceinline__ void mbar_arrive(u32 b) { asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(b) : "memory"); }
#ifdef NBX_ATTN_WATCH
__device__ __forceinline__ bool mbar_try(u32 b, u32 parity) {
  u32 ok;
  asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }" : "=r"(ok) : "r"(b), "r"(parity) : "memory");
  return ok != 0;
}
__device__ __forceinline__ u64 gtimer() { u64 t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t; }
// what: 0 Q full, 1 K full, 2 V full, 3 K empty, 4 V empty, 5 Q empty; t: the tile (Q: the work item) waited for. (A call in the kernel:
// ptxas then ignores setmaxnreg and serializes the wgmmas, so the watch build is slow; it is for diagnosis.)
__device__ __noinline__ void mbar_stuck(int what, int t, u32 parity) {
  printf("attn_fwd90 WATCH: block %d thread %d waited > ${WATCH_NS / 1e9} s on %s of tile %d (parity %u)\n", (int)blockIdx.x, (int)threadIdx.x,
    what == 0 ? "Q full" : what == 1 ? "K full" : what == 2 ? "V full" : what == 3 ? "K empty" : what == 4 ? "V empty" : "Q empty", t, parity);
  asm volatile("trap;");
}
__device__ __forceinline__ void mbar_wait(u32 b, u32 parity, int what, int t) {
  if (mbar_try(b, parity)) return;
  const u64 t0 = gtimer();
  while (!mbar_try(b, parity)) if (gtimer() - t0 > ${WATCH_NS}ull) mbar_stuck(what, t, parity);
}
#else
__device__ __forceinline__ void mbar_wait(u32 b, u32 parity, int, int) {
  asm volatile("{ .reg .pred p;\n"
    "WAIT_%=: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
    "@!p bra WAIT_%=; }" :: "r"(b), "r"(parity) : "memory");
}
#endif
// one arrival on b, made by the hardware once every cp.async this thread issued before has landed
// (.noinc: it is one of the arrivals the barrier was initialised to expect)
__device__ __forceinline__ void cp_arrive(u32 b) { asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" :: "r"(b) : "memory"); }
// one arrival on b that also expects bytes more transaction bytes (the TMA loads issued next complete them)
__device__ __forceinline__ void mbar_arrive_tx(u32 b, u32 bytes) { asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(b), "r"(bytes) : "memory"); }
// a 4-D tiled TMA load into shared memory (dst), completing bytes on the mbarrier b; map: a __grid_constant__ descriptor
__device__ __forceinline__ void tma_load4(u32 dst, const void* map, int c0, int c1, int c2, int c3, u32 b) {
  asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], [%6];"
    :: "r"(dst), "l"((u64)map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(b) : "memory");
}
// (immediate barrier ids: ptxas reserves all 16 hardware barriers for a register id)
__device__ __forceinline__ void nb_arrive(int id, int n) { if (id == 1) asm volatile("bar.arrive 1, %0;" :: "n"(256) : "memory"); else asm volatile("bar.arrive 2, %0;" :: "n"(256) : "memory"); }
__device__ __forceinline__ void nb_sync(int id, int n) { if (id == 1) asm volatile("bar.sync 1, %0;" :: "n"(256) : "memory"); else asm volatile("bar.sync 2, %0;" :: "n"(256) : "memory"); }
// makes the barriers' initialisation visible before any thread uses them
__device__ __forceinline__ void init_fence() { asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"); }
__device__ __forceinline__ void cp16(void* dst, const void* src, bool ok) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" :: "r"(smem_u32(dst)), "l"(src), "r"(ok ? 16 : 0) : "memory");
}
__device__ __forceinline__ void cp_wait_all() { asm volatile("cp.async.wait_all;" ::: "memory"); }
// cp.async writes through the generic proxy, wgmma reads through the async proxy
__device__ __forceinline__ void proxy_fence() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }
__device__ __forceinline__ void wg_arrive() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N> __device__ __forceinline__ void wg_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;" :: "n"(N) : "memory"); }
template <int N> __device__ __forceinline__ void reg_dealloc() { asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" :: "n"(N)); }
template <int N> __device__ __forceinline__ void reg_alloc() { asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" :: "n"(N)); }
__device__ __forceinline__ u32 pack2(float lo, float hi) { u32 r; asm("cvt.rn.${ty}x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo)); return r; }
__device__ __forceinline__ float fexp2(float x) { float y; asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x)); return y; }
${EXP2_FMA}
// a zero that the compiler cannot sink past wgmma.fence (a plain 0.f moved next to the first P·V made
// ptxas serialize every wgmma: "non wgmma instructions defining accumulator registers")
__device__ __forceinline__ float acc_zero() { float z; asm volatile("mov.b32 %0, 0;" : "=f"(z)); return z; }
${dev}
#endif
// SW128 descriptor: start address, LBO, SBO (bytes), 128-byte swizzle
__device__ __forceinline__ u64 sw128_desc(u32 addr, u32 lbo, u32 sbo) {
  return (u64)((addr >> 4) & 0x3fff) | ((u64)((lbo >> 4) & 0x3fff) << 16) | ((u64)((sbo >> 4) & 0x3fff) << 32) | (1ull << 62);
}
`;
}

/**
 * The prefill kernels' epilogue (this file's and the mma.sync kernel's): each thread's rows rowA and rowA + 8
 * divided by their softmax sums (the quad's partial sums added; a row that sees no key gives 0) and stored
 * as packed pairs at columns i·8 + 2·tg; acc(c) names element c (0, 1) of pair i of row r.
 */
export function prefillStoreO(pairs: number, acc: (c: number) => string, sum?: (r: string) => string): string {
  return `  #pragma unroll
  for (int r = 0; r < 2; r++) {
${sum ? `    const float l = ${sum('r')}; // the whole row's sum (the tensor cores summed over every key)` : `    float l = lrow[r];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);`}
    const float inv = l > 0.f ? 1.f / l : 0.f; // a row that sees no key: 0
    const int row = rowA + r * 8;
    if (row < L) {
      u16* orow = O + oo + b * osb + h * osh + (long long)row * osl;
      #pragma unroll
      for (int i = 0; i < ${pairs}; i++) *(u32*)(orow + i * 8 + tg * 2) = pack2(${acc(0)} * inv, ${acc(1)} * inv);
    }
  }`;
}

/** A balanced tree over n terms: op(a, b) (or a + b where op is empty). */
function tree(n: number, term: (i: number) => string, op: string): string {
  const go = (lo: number, hi: number): string => {
    if (hi - lo === 1) return term(lo);
    const mid = (lo + hi) >> 1, a = go(lo, mid), b = go(mid, hi);
    return op ? `${op}(${a}, ${b})` : `(${a} + ${b})`;
  };
  return go(0, n);
}

/** The mask term for score element (row, col) added to `x` (already in log2 units). */
function maskTerm(mask: Sm90MaskKind, x: string, idx: string): string {
  if (mask === 'none') return '';
  if (mask === 'bool') return `if (mb[${idx}] == 0) ${x} = -INFINITY;`;
  return `${x} += (float)${R.load(mask, 'mb', idx)} * 1.4426950408889634f;`;
}

export interface Sm90SourceOptions {
  /** NBX_ATTENTION_WATCH: every wait bounded (a hang becomes a trap naming the wait). */
  watch?: boolean;
  /**
   * K and V tiles loaded by the tensor memory accelerator (one producer thread, descriptors passed by value
   * as the last parameter, see sm90TmaMaps) instead of cp.async by the producer warpgroup's 128 threads.
   */
  tma?: boolean;
  /**
   * Diagnostics only (wrong results; scripts/attention-check.mjs --part=time with NBX_ATTENTION_ABLATE): 'noload'
   * the TMA producer signals tiles without loading them (the MMAs and softmax alone), 'nosoftmax' P = S without
   * the exponentials (MMAs and loads alone).
   */
  ablate?: 'noload' | 'nosoftmax';
  /**
   * The online softmax's arithmetic (NBX_ATTENTION_SOFTMAX, for measuring; each moves bits): 'serial' the fifth
   * session's (the row max and sum as one chain each, the running max follows every increase), 'tree' the max and
   * sum over 4 independent partials, 'lazy' (default) as tree, and the running max moves only when a tile's
   * exceeds it by more than 8 in log2 units (O hardly ever rescaled), 'poly' as lazy with a quarter of the
   * exponentials of unmasked tiles computed on the FMA pipes (FlashAttention-4's offload of the MUFU), 'tcsum' as
   * lazy with the row sums on the tensor cores: V gets 8 more columns of ones (a slab of ones after each V slot,
   * written once), P·V is m64n(D+8), and its last accumulators are the sums of the rounded P (no adds in the
   * softmax); head dims 64/128 (at 256, N would pass 256: as lazy there).
   */
  softmax?: Sm90Softmax;
  /**
   * The producer's and the consumers' registers after setmaxnreg (NBX_ATTENTION_REGS=24,240, for measuring; default 40 and
   * 232). p·128 + 2·c·128 must not pass 168·384 (the launch bound); FlashAttention-3 takes 24 / 240 with two consumer warpgroups.
   */
  regs?: [number, number];
  /**
   * The programmatic-dependent-launch wait after the block's prologue (mbarrier init, the tcsum ones, the TMA descriptors'
   * prefetch), which reads nothing an earlier kernel writes, instead of first thing: the prologue overlaps the previous
   * kernel's tail. Default true; false (NBX_ATTENTION_EARLY=0, for measuring) leaves the wait to the runtime's rewrite.
   */
  early?: boolean;
}
export type Sm90Softmax = 'serial' | 'tree' | 'lazy' | 'poly' | 'tcsum';
export const SM90_SOFTMAX: readonly Sm90Softmax[] = ['serial', 'tree', 'lazy', 'poly', 'tcsum'];
/** The softmax form built when NBX_ATTENTION_SOFTMAX is unset. */
export const SM90_SOFTMAX_DEFAULT: Sm90Softmax = 'lazy';

/** Kernel parameters of the TMA build: Q's, K's and V's descriptors (128 bytes each) as 48 words after the common ones. */
export const SM90_TMA_WORDS = 48;

export function sm90Source(dt: DTypeName, D: number, c: Sm90Config, mask: Sm90MaskKind, opts: Sm90SourceOptions = {}): { src: string; name: string; sig: ArgType[] } {
  if (dt !== 'float16' && dt !== 'bfloat16') throw new UnsupportedError('attention', `the sm_90 prefill kernel takes float16/bfloat16, got ${dt}`);
  if (!SM90_HEAD_DIMS.includes(D)) throw new UnsupportedError('attention', `the sm_90 prefill kernel takes head dims ${SM90_HEAD_DIMS.join(', ')}, got ${D}`);
  const { blockN: BN, stages: ST } = c;
  const PP = !!c.pingpong, DP = !!c.deep;
  if (DP && PP) throw new UnsupportedError('attention', 'the deep sm_90 schedule has no ping-pong variant');
  const EG = !!c.edge;
  if (EG && (PP || DP || c.chain)) throw new UnsupportedError('attention', 'the per-warpgroup causal edge is a build without ping-pong, the deep schedule or chained items');
  if (BN % 16 !== 0 || BN < 16 || BN > 256 || ST < 2) throw new UnsupportedError('attention', `the sm_90 prefill kernel takes BLOCK_N a multiple of 16 up to 256 and 2+ stages, got ${BN}/${ST}`);
  const BM = SM90_BLOCK_M;
  const TMA = !!opts.tma;
  const P = !!c.persistent, CHN = !!c.chain, QS = sm90QSlots(c);
  if (P && !TMA) throw new UnsupportedError('attention', 'the persistent sm_90 kernel is a TMA build');
  if (CHN && (!P || DP)) throw new UnsupportedError('attention', 'chained items are a persistent build without the deep schedule');
  const [RP_, RC_] = opts.regs ?? [REG_PRODUCER, REG_CONSUMER];
  if (RP_ % 8 || RC_ % 8 || RP_ < 24 || RC_ > 256 || RP_ * 128 + 2 * RC_ * 128 > 168 * SM90_THREADS) throw new UnsupportedError('attention', `setmaxnreg ${RP_}/${RC_}: multiples of 8 in 24-256 within 168 x ${SM90_THREADS}`);
  const EARLY = opts.early ?? true;
  const SPL = !!c.split, TT = SPL ? '(tb + t)' : 't', TV = SPL ? '(tb + t - 1)' : '(t - 1)'; // (the key tile's index in its item)
  const OST = !!c.ostore;
  if (OST && !P) throw new UnsupportedError('attention', 'O through shared memory is a persistent build');
  if (SPL && (!P || CHN || DP || EG)) throw new UnsupportedError('attention', 'split items are a persistent build without chained items, the deep schedule or the edge');
  const AB = opts.ablate;
  if (AB === 'noload' && !TMA) throw new UnsupportedError('attention', 'the noload diagnostic is a TMA build');
  const MT = mask === 'none' ? 'unsigned char' : R.storageType(mask);
  const SX0 = opts.softmax ?? c.softmax ?? SM90_SOFTMAX_DEFAULT;
  const ONES = sm90Ones(D, SX0), SX = SX0 === 'tcsum' ? 'lazy' : SX0;
  // P·V's N (tcsum: 8 columns of ones after V's D) and V's 64-column slabs per ring slot
  const ND = ONES ? D + 8 : D, VS = ONES ? D / 64 + 1 : D / 64;
  const NS = BN / 2, NO = ND / 2; // accumulator floats per thread: S (64 x BN), O (64 x ND)
  // partials of the row max and sum (2 at D 256, where O takes 128 registers), the lazy rescale's threshold (log2 units)
  const RP = Math.min(D >= 256 ? 2 : 4, BN / 8), LAZY = 8;
  // exp2(S·sc - mu) of row r's pairs into P, their sums into the partials lp; poly: every fourth pair by exp2_fma
  const expLoop = (poly: boolean): string => `      #pragma unroll
      for (int j = 0; j < ${BN / 8}; j++) {
        const float x0 = fmaf(sacc[4 * j + 2 * r], sc, -mu), x1 = fmaf(sacc[4 * j + 2 * r + 1], sc, -mu);
        const float p0 = ${poly ? '(j & 3) == 3 ? exp2_fma(x0) : ' : ''}fexp2(x0), p1 = ${poly ? '(j & 3) == 3 ? exp2_fma(x1) : ' : ''}fexp2(x1);
        sacc[4 * j + 2 * r] = p0; sacc[4 * j + 2 * r + 1] = p1;
${ONES ? '' : `        if (j < ${RP}) lp[j] = p0 + p1; else lp[j % ${RP}] += p0 + p1;
`}      }`;
  // The deep schedule (config deep): S(t+1) = Q·K(t+1)ᵀ is issued, into the other of two S arrays, together with
  // P(t-1)·V(t-1) before the softmax of tile t, so the warpgroup's own MMAs (both GEMMs of a tile) run under its
  // softmax; the plain schedule has only P·V(t-1) under it and issues S(t+1) after it. Nothing stays in flight
  // from one step to the next (each step ends with wait_group 0): ptxas serializes every wgmma (C7513/C7514)
  // when a wgmma issued in one step is still pending while the next step reads or writes registers. The body
  // is emitted twice with the arrays swapped, so each wgmma writes one fixed register array.
  const deepStep = (t: string, X: string, Y: string): string => `        rescale();
        issuePV(${t} - 1);
        issueS(${Y}, ${t} + 1, ${t} + 1 >= nt);
        softmax(${X}, ${t}); // S(${t}) complete since the previous step; P·V(${t} - 1) and S(${t} + 1) run under it
        wg_wait<0>();
        reg_fence${ND}(oacc);
        reg_fence${BN}(${Y});
        releaseV(${t} - 1);
        if (${t} + 1 < nt) releaseK(${t} + 1);
        pack(${X});`;
  const deepLoop = `    if (nt > 0) {${P ? '' : `
      mbar_wait(barQ, it & 1, 0, it);`}
      issueS(sacc, 0, false);
      issueS(sacc2, 1, nt < 2);
      wg_wait<0>();
      reg_fence${BN}(sacc);
      reg_fence${BN}(sacc2);
      releaseK(0);
      if (nt > 1) releaseK(1);
      softmax(sacc, 0);
      pack(sacc);
      // step t: S(t) complete (sacc2 for odd t), P(t-1) in pf, the other array free
      for (int t = 1; t < nt; t += 2) {
${deepStep('t', 'sacc2', 'sacc')}
        if (t + 1 >= nt) break;
${deepStep('(t + 1)', 'sacc', 'sacc2')}
      }
      rescale();
      issuePV(nt - 1);
      wg_wait<0>();
      reg_fence${ND}(oacc);
      releaseV(nt - 1);
`;
  // The consumers' schedule, written once for the per-item loop and the chained one: an item's first tile (Q·K(0)ᵀ
  // alone, then its softmax), a step (tile t's Q·Kᵀ with P·V of the tile before; `mid` runs once that P·V is
  // done, before P(t) is packed) and the last P·V (tile `tile`, relative to gt).
  const itemStart = `    rowA = m0 + cw * 64 + warp * 16 + g;
    mb = MK + mo + b * msb + h * msh;
    aQ = smem_u32(sQ) + qs * ${BM * 2} * D_ + cw * 64 * 128;
    mrow[0] = mrow[1] = -INFINITY;`;
  const firstTile = `${PP ? '      turnWait();\n' : ''}      issueS(sacc, 0, false);${PP ? '\n      turnPass();' : ''}
      wg_wait<0>();
      reg_fence${BN}(sacc);
      releaseK(0);
      softmax(sacc, 0);
      pack(sacc);`;
  const tileStep = (mid: string): string => `${PP ? '        turnWait();\n' : ''}        issueS(sacc, t, false);
        rescale();
        issuePV(t - 1);${PP ? '\n        turnPass();' : ''}
        // S(t) done (P·V(t-1), committed after it, may still run): K(t) is free, the softmax runs under P·V(t-1)
        wg_wait<1>();
        reg_fence${BN}(sacc);
        releaseK(t);
        softmax(sacc, t);
        wg_wait<0>();
        reg_fence${ND}(oacc);
        releaseV(t - 1); // V(t-1) read; pf free again
${mid}        pack(sacc);`;
  const lastPV = (tile: string): string => `${PP ? '      turnWait();\n' : ''}      rescale();
      issuePV(${tile});${PP ? '\n      if (cw == 0) turnPass();' : ''}
      wg_wait<0>();
      reg_fence${ND}(oacc);
      releaseV(${tile});`;
  // ostore: this warpgroup's 64 rows into its half of the staging tile (conflict-free 4-byte shared stores: the quad's 16
  // bytes of a row land in the chunk the row's swizzle puts them), then copied out by the warpgroup in 16-byte chunks, a
  // warp two whole rows (256 contiguous bytes each) an instruction; the barriers keep the staging rows' writes after the
  // previous copy-out's reads and the copy-out after the writes
  const wholeStore = OST ? `    nb_sync_o(cw);
    #pragma unroll
    for (int r = 0; r < 2; r++) {
${ONES ? `      const float l = oacc[${D / 2} + 2 * r];` : `      float l = lrow[r];
      l += __shfl_xor_sync(0xffffffffu, l, 1);
      l += __shfl_xor_sync(0xffffffffu, l, 2);`}
      const float inv = l > 0.f ? 1.f / l : 0.f; // a row that sees no key: 0
      const int lr = cw * 64 + warp * 16 + g + r * 8;
      #pragma unroll
      for (int i = 0; i < ${D / 8}; i++) *(u32*)(sO + tofs(${BM}, lr, i) + tg * 4) = pack2(oacc[4 * i + 2 * r] * inv, oacc[4 * i + 2 * r + 1] * inv);
    }
    nb_sync_o(cw);
    #pragma unroll
    for (int k = 0; k < ${D / 16}; k++) {
      const int c = wt + k * 128, lr = cw * 64 + c / CH, ch = c % CH, row = rowA - warp * 16 - g + lr - cw * 64; // (rowA - its row in the warpgroup: the item's first row + 64·cw)
      if (row < L) *(uint4*)(O + oo + b * osb + h * osh + (long long)row * osl + ch * 8) = *(const uint4*)(sO + tofs(${BM}, lr, ch));
    }` : prefillStoreO(D / 8, (c) => `oacc[4 * i + 2 * r + ${c}]`, ONES ? (r) => `oacc[${D / 2} + 2 * ${r}]` : undefined);
  // Chained items (persistent): one loop over the tiles of all the block's items. A step issues Q·K(t)ᵀ and P·V of
  // the tile before whichever items they belong to, so an item's first Q·Kᵀ and softmax run under the previous
  // item's last P·V (the per-item loop runs them with nothing of its own warpgroup under them, and its last P·V
  // alone), and the finished item's O is stored once that P·V is done (after the step's wait_group 0: nothing stays
  // in flight across the back edge, which ptxas needs to keep the wgmmas asynchronous). The next item's Q is in the
  // other Q buffer, loaded as soon as the producer passed the current item's loads. An item's first softmax starts
  // from a running max of -inf, so its corr is 0 and the next rescale zeroes O and restarts the sums (no reset of
  // the accumulators between wgmmas). Every item has a tile: S ≥ 1 (the op layer takes empty inputs elsewhere).
  const chainLoop = `  // the finished item's O: this thread's rows from rowA, of batch b and head h, divided by the sums lrow
  auto storeO = [&](int b, int h, int rowA, const float (&lrow)[2]) {
${OST ? wholeStore : prefillStoreO(D / 8, (c) => `oacc[4 * i + 2 * r + ${c}]`, ONES ? (r) => `oacc[${D / 2} + 2 * ${r}]` : undefined)}
  };
  float lfin[2] = {0.f, 0.f};
  int bfin = 0, hfin = 0, rfin = 0, t = 0, it = 0;
  mbar_wait(barQ(0), 0, 0, 0);
  int w = sItem[0];
  if (w < items) {
    item(w);
${itemStart}
    #pragma unroll
    for (int i = 0; i < ${NO}; i++) oacc[i] = acc_zero();
    lrow[0] = lrow[1] = 0.f; corr[0] = corr[1] = 1.f;
${PP ? '    if (cw == 1) turnPass();\n' : ''}${firstTile}
    for (;;) {
      const bool fin = t + 1 == nt; // tile t was its item's last: that item's O is complete after this step's P·V
      if (fin) {
        bfin = b; hfin = h; rfin = rowA; lfin[0] = lrow[0]; lfin[1] = lrow[1];
        gt += nt; t = 0; qs = ++it & 1;
        mbar_wait(barQ(qs), (it >> 1) & 1, 0, it); // the next item's index arrives with its Q
        const int w = sItem[qs];
        if (w >= items) break;
        item(w);
${itemStart}
      } else {
        t++;
      }
${tileStep('        if (fin) storeO(bfin, hfin, rfin, lfin);\n')}
    }
    // the last item's last P·V (tile gt - 1: t is 0 past the item)
${lastPV('t - 1')}
    storeO(bfin, hfin, rfin, lfin);
  }`;
  // split (persistent): a whole item's O as always; a part's unnormalised O, running max and row sum (fp32) into its
  // workspace slot (WS: slots of [128 rows][D] for O, then slots of [128 rows][max, sum]), counted on its item's
  // counter WC[si]; the block that counts last merges the item's PK ≤ 8 slots in part order (the weights exp2(max - M)
  // over the parts' running maxima, which are those their O and sum share) and resets the counter for the next launch
  const slotO = (j: string): string => `WS + (long long)(${j}) * ${BM * D}`;
  const slotML = (j: string): string => `WS + (long long)(ntiles * BH - R0) * PK * ${BM * D} + (long long)(${j}) * ${BM * 2}`;
  const splitStore = `    if (sp < 0) {
${wholeStore}
    } else {
      float* wo = ${slotO('si * PK + sp')};
      float* wml = ${slotML('si * PK + sp')};
      #pragma unroll
      for (int r = 0; r < 2; r++) {
        const int lr = rowA - m0 + r * 8;
${ONES ? `        const float l = oacc[${D / 2} + 2 * r];` : `        float l = lrow[r];
        l += __shfl_xor_sync(0xffffffffu, l, 1);
        l += __shfl_xor_sync(0xffffffffu, l, 2);`}
        #pragma unroll
        for (int i = 0; i < ${D / 8}; i++) *(float2*)(wo + lr * ${D} + i * 8 + tg * 2) = make_float2(oacc[4 * i + 2 * r], oacc[4 * i + 2 * r + 1]);
        if (tg == 0) *(float2*)(wml + lr * 2) = make_float2(mrow[r], l);
      }
      __threadfence(); // this part visible to the block that merges
      nb_sync_c();
      if (wt == 0 && cw == 0) sItem[2] = atomicAdd(WC + si, 1) == PK - 1;
      nb_sync_c();
      const bool last = sItem[2] != 0; // (read before this block's next part writes it: that one meets at barrier 3 first)
      if (last) {
        __threadfence();
        #pragma unroll
        for (int r = 0; r < 2; r++) {
          const int lr = rowA - m0 + r * 8, row = rowA + r * 8;
          const float* ml = ${slotML('si * PK')} + lr * 2;
          float M = -INFINITY;
          #pragma unroll
          for (int j = 0; j < 8; j++) if (j < PK) M = fmaxf(M, __ldcg(ml + j * ${BM * 2}));
          const float mu = M == -INFINITY ? 0.f : M;
          float f[8], l = 0.f;
          #pragma unroll
          for (int j = 0; j < 8; j++) { f[j] = j < PK ? fexp2(__ldcg(ml + j * ${BM * 2}) - mu) : 0.f; if (j < PK) l = fmaf(__ldcg(ml + j * ${BM * 2} + 1), f[j], l); }
          const float inv = l > 0.f ? 1.f / l : 0.f; // a row that sees no key: 0
          if (row < L) {
            const float* po = ${slotO('si * PK')} + lr * ${D} + tg * 2;
            u16* orow = O + oo + b * osb + h * osh + (long long)row * osl;
            #pragma unroll 4
            for (int i = 0; i < ${D / 8}; i++) {
              float a0 = 0.f, a1 = 0.f;
              #pragma unroll
              for (int j = 0; j < 8; j++) if (j < PK) { const float2 x = __ldcg((const float2*)(po + j * ${BM * D} + i * 8)); a0 = fmaf(x.x, f[j], a0); a1 = fmaf(x.y, f[j], a1); }
              *(u32*)(orow + i * 8 + tg * 2) = pack2(a0 * inv, a1 * inv);
            }
          }
        }
        if (wt == 0 && cw == 0) WC[si] = 0; // every part has counted itself: ready for the next launch
      }
    }`;
  const src = `${opts.watch ? '#define NBX_ATTN_WATCH 1\n' : ''}${wgmmaHelpers(dt === 'bfloat16', [BN, ND])}${OST ? `
// ostore: a warpgroup's named barrier (4 + cw, 128 threads) around O's staging rows
#ifdef NBX_EMU
__device__ __forceinline__ void nb_sync_o(int cw) { nb_sync(4 + cw, 128); }
#else
__device__ __forceinline__ void nb_sync_o(int cw) { if (cw == 0) asm volatile("bar.sync 4, 128;" ::: "memory"); else asm volatile("bar.sync 5, 128;" ::: "memory"); }
#endif` : ''}${SPL ? `
// split: the two consumer warpgroups (256 threads) meet at named barrier 3 (ping-pong takes 1 and 2)
#ifdef NBX_EMU
__device__ __forceinline__ void nb_sync_c() { nb_sync(3, 256); }
#else
__device__ __forceinline__ void nb_sync_c() { asm volatile("bar.sync 3, 256;" ::: "memory"); }
#endif` : ''}
${EARLY ? `#ifndef NBX_GRID_DEPENDENCY_WAIT
#define NBX_GRID_DEPENDENCY_WAIT()
#endif
` : ''}constexpr int D_ = ${D};
constexpr int CH = D_ / 8;      // 16-byte chunks per row
// byte offset of chunk ch of row r in a [D_/64][rows][64] tile, 128B-swizzled (tile base 1024-aligned)
__device__ __forceinline__ u32 tofs(int rows, int r, int ch) { return (u32)((ch >> 3) * rows * 128 + r * 128 + (((ch & 7) ^ (r & 7)) << 4)); }
${TMA ? `#if !defined(__grid_constant__) && !defined(NBX_EMU)
#define __grid_constant__ __attribute__((grid_constant))
#endif
#ifdef NBX_EMU
#define __grid_constant__
#endif
// Q's, K's and V's TMA descriptors (CUtensorMap: 128 bytes, 64-aligned), dims {D, rows, heads, batch}
struct alignas(64) TMaps { u64 q[16]; u64 k[16]; u64 v[16]; };
${EARLY ? `#ifdef NBX_EMU
__device__ __forceinline__ void prefetch_tmap(const void*) {}
#else
__device__ __forceinline__ void prefetch_tmap(const void* p) { asm volatile("prefetch.tensormap [%0];" :: "l"((u64)p) : "memory"); }
#endif
` : ''}` : ''}
extern "C" __global__ void __launch_bounds__(${SM90_THREADS}, 1) attn_fwd90(
  ${TMA ? '' : 'const u16* __restrict__ Q, const u16* __restrict__ K, const u16* __restrict__ V, '}u16* __restrict__ O, const ${MT}* __restrict__ MK,${P ? ' int* __restrict__ WQ,' : ''}
  ${TMA ? '' : `long long qo, long long qsb, long long qsh, long long qsl, long long ko, long long ksb, long long ksh, long long ksl,
  long long vo, long long vsb, long long vsh, long long vsl, `}long long oo, long long osb, long long osh, long long osl,
  long long mo, long long msb, long long msh, long long msl, long long mss,
  int H, int rep, int L, int S, int BH, int ntiles, float sl2, int causal${P ? ', int G' : ''}${SPL ? ', int R0, int PK, float* __restrict__ WS, int* __restrict__ WC' : ''}${TMA ? ', const __grid_constant__ TMaps tm' : ''}) {
  extern __shared__ __align__(1024) unsigned char smraw[];
  unsigned char* sm = smraw + ((1024 - (smem_u32(smraw) & 1023)) & 1023);
  unsigned char* sQ = sm;                                  // ${QS} x [D_/64][${BM}][64]
${OST ? `  unsigned char* sO = sQ + ${QS * BM} * D_ * 2;                 // [D_/64][${BM}][64]: O's staging tile (ostore)
` : ''}  unsigned char* sK = sQ + ${(QS + (OST ? 1 : 0)) * BM} * D_ * 2;                 // ${ST} x [D_/64][${BN}][64]
  unsigned char* sV = sK + ${ST * BN} * D_ * 2;             // ${ST} x [${VS}][${BN}][64]${ONES ? ' (the last slab: ones)' : ''}
  // mbarriers: Q full; per slot K full, V full (the producer's arrivals), K empty, V empty (one per consumer
  // warp); Q empty (persistent: one per consumer warp once its last Q·Kᵀ of a work item is done)${QS > 1 ? '; then\n  // Q full and Q empty of the second Q buffer' : ''}
  const u32 bars = smem_u32(sV + ${ST * BN * VS * 128});${P ? `
  volatile int* sItem = (volatile int*)(sV + ${ST * BN * VS * 128} + 8 * ${2 * QS + 4 * ST}); // the producer's item index per Q buffer, read with its Q` : ''}
  auto barQ = [&](int q) { return bars + 8u * q * ${2 + 4 * ST}; };
  auto barQE = [&](int q) { return bars + 8u * (${1 + 4 * ST} + 2 * q); };
  auto barK = [&](int s) { return bars + 8u * (1 + s); };
  auto barV = [&](int s) { return bars + 8u * (1 + ${ST} + s); };
  auto barEK = [&](int s) { return bars + 8u * (1 + ${2 * ST} + s); };
  auto barEV = [&](int s) { return bars + 8u * (1 + ${3 * ST} + s); };
  const int tid = threadIdx.x, wg = tid >> 7;
  // work item w: ${P ? `the batch·heads in groups of G (whose K/V fit in L2 together), each group's query tiles heaviest
  // (causal: last) first across its heads. Persistent: the producer takes the next item from the counter WQ[0]
  // (atomicAdd, so a block that finished early takes more: no static schedule to unbalance) and passes its index
  // to the consumers with its Q; the block that finishes last resets the counters for the next launch.` : `batch·head z = w / ntiles and its query tiles heaviest (causal: last) first, so the blocks
  // running together share a head's K/V in L2. One item per block.`}
  int b = 0, h = 0, hk = 0, m0 = 0, nt = 0;${SPL ? `
  // split: work index w ≥ R0 is part sp of item R0 + si (its tiles tb .. tb + nt - 1 of the item's); sp -1: a whole item
  int tb = 0, sp = -1, si = 0;` : ''}
  auto item = [&](int w) {
${SPL ? `    sp = -1; tb = 0;
    if (w >= R0) { const int u = w - R0; si = u / PK; sp = u - si * PK; w = R0 + si; }
` : ''}${P ? `    const int z0 = w / (G * ntiles) * G, gc = min(G, BH - z0), r = w - z0 * ntiles;
    const int z = z0 + r % gc, mt = ntiles - 1 - r / gc;` : `    const int z = w / ntiles, mt = ntiles - 1 - w % ntiles;`}
    b = z / H; h = z % H; hk = h / rep; m0 = mt * ${BM};
    const int nEnd = causal ? min(S, m0 + ${BM}) : S;
    nt = (nEnd + ${BN - 1}) / ${BN}; // the same for every warpgroup of the block${SPL ? `
    if (sp >= 0) { tb = sp * nt / PK; nt = (sp + 1) * nt / PK - tb; }` : ''}
  };
${P ? `  const int items = ${SPL ? 'R0 + (ntiles * BH - R0) * PK' : 'ntiles * BH'};${SPL ? ' // work indices: whole items, then the parts' : ''}\n` : ''}  if (tid == 0) {
    for (int q = 0; q < ${QS}; q++) { mbar_init(barQ(q), ${TMA ? 1 : 128}); mbar_init(barQE(q), 8); }
    // full: the producer's arrivals (TMA: one, with the tile's bytes); empty: one per consumer warp
    for (int s = 0; s < ${ST}; s++) { mbar_init(barK(s), ${TMA ? 1 : 128}); mbar_init(barV(s), ${TMA ? 1 : 128}); mbar_init(barEK(s), 8); mbar_init(barEV(s), 8); }
    init_fence();${EARLY && TMA ? `
    prefetch_tmap(&tm.q); prefetch_tmap(&tm.k); prefetch_tmap(&tm.v);` : ''}
  }
${ONES ? `  // tcsum: the slab of ones after each V slot (TMA never writes it), visible to the async proxy before any wgmma
  for (int i = tid; i < ${ST * BN * 32}; i += ${SM90_THREADS}) {
    const int sl = i / ${BN * 32}, o = i % ${BN * 32};
    *(u32*)(sV + (sl * ${VS} + ${VS - 1}) * ${BN * 128} + o * 4) = ${dt === 'bfloat16' ? '0x3f803f80u' : '0x3c003c00u'};
  }
  proxy_fence();
` : ''}  __syncthreads();${EARLY ? `
  NBX_GRID_DEPENDENCY_WAIT(); // (programmatic dependent launch: nothing above reads what an earlier kernel writes)` : ''}
  if (wg == 0) {
    reg_dealloc<${RP_}>();
${TMA ? `    // ---- producer: one thread issues every load: per work item Q, then K(t) and V(t-1) for t = 0..nt (boxes of
    // 64 columns x rows per 128-byte-row slab, the hardware's 128B swizzle; rows past the end arrive as zeros).
    // Ring slots and phases count tiles over the block's work items (gt). It never waits for its own loads.
    if (tid != 0) return;
    int gt = 0;
${P ? `    int w = atomicAdd(WQ, 1);
    for (int it = 0; ; it++) {
      const int qs = it % ${QS}; // the item's Q buffer
      if (it >= ${QS}) mbar_wait(barQE(qs), ((it - ${QS}) / ${QS}) & 1, 5, it - ${QS}); // Q·Kᵀ of the buffer's previous item done (and its index read)
      sItem[qs] = w;
      if (w >= items) { mbar_arrive(barQ(qs)); break; } // no more items: the consumers read an index past the end
      item(w);
      const int wn = atomicAdd(WQ, 1); // the next item's index, fetched while this one loads` : `    for (int w = blockIdx.x, qs = 0; w < blockIdx.x + 1; w++) {
      item(w);`}
      mbar_arrive_tx(barQ(qs), ${BM * 2} * D_);
      #pragma unroll
      for (int j = 0; j < D_ / 64; j++) tma_load4(smem_u32(sQ) + qs * ${BM * 2} * D_ + j * ${BM * 128}, &tm.q, j * 64, m0, h, b, barQ(qs));
      for (int t = 0; t <= nt; t++) {
        if (t < nt) {
          const int g = gt + t, s = g % ${ST};
          if (g >= ${ST}) mbar_wait(barEK(s), ((g / ${ST}) + 1) & 1, 3, g - ${ST}); // K of tile g - ${ST} released
${AB === 'noload' ? `          mbar_arrive(barK(s));` : `          mbar_arrive_tx(barK(s), ${BN * 2} * D_);
          #pragma unroll
          for (int j = 0; j < D_ / 64; j++) tma_load4(smem_u32(sK) + (s * D_ / 64 + j) * ${BN * 128}, &tm.k, j * 64, ${TT} * ${BN}, hk, b, barK(s));`}
        }
        if (t > 0) {
          const int g = gt + t - 1, s = g % ${ST};
          if (g >= ${ST}) mbar_wait(barEV(s), ((g / ${ST}) + 1) & 1, 4, g - ${ST}); // V of tile g - ${ST} released
${AB === 'noload' ? `          mbar_arrive(barV(s));` : `          mbar_arrive_tx(barV(s), ${BN * 2} * D_);
          #pragma unroll
          for (int j = 0; j < D_ / 64; j++) tma_load4(smem_u32(sV) + (s * ${VS} + j) * ${BN * 128}, &tm.v, j * 64, ${TV} * ${BN}, hk, b, barV(s));`}
        }
      }
      gt += nt;${P ? ' w = wn;' : ''}
    }
${P ? `    __threadfence();
    if (atomicAdd(WQ + 1, 1) == (int)gridDim.x - 1) { WQ[0] = 0; WQ[1] = 0; } // every block past its last fetch
` : ''}    // (the loads in flight complete on their barriers without this thread; the consumers wait for them)
    return;
` : `    // ---- producer: Q, then K(t) and V(t-1) for t = 0..nt by cp.async (128 threads); never waits for its own copies ----
    item(blockIdx.x);
    const u16* qb = Q + qo + b * qsb + h * qsh;
    for (int c = tid; c < ${BM} * CH; c += 128) {
      const int r = c / CH, ch = c % CH; const bool ok = m0 + r < L;
      cp16(sQ + tofs(${BM}, r, ch), qb + (ok ? (long long)(m0 + r) * qsl : 0LL) + ch * 8, ok);
    }
    cp_arrive(barQ(0));
    const u16* kb = K + ko + b * ksb + hk * ksh;
    const u16* vb = V + vo + b * vsb + hk * vsh;
    for (int t = 0; t <= nt; t++) {
      if (t < nt) {
        const int s = t % ${ST}, n0 = t * ${BN};
        if (t >= ${ST}) mbar_wait(barEK(s), ((t / ${ST}) + 1) & 1, 3, t - ${ST}); // K of tile t - ${ST} released
        unsigned char* dk = sK + s * ${BN} * D_ * 2;
        for (int c = tid; c < ${BN} * CH; c += 128) {
          const int r = c / CH, ch = c % CH; const bool ok = n0 + r < S;
          cp16(dk + tofs(${BN}, r, ch), kb + (ok ? (long long)(n0 + r) * ksl : 0LL) + ch * 8, ok);
        }
        cp_arrive(barK(s));
      }
      if (t > 0) {
        const int u = t - 1, s = u % ${ST}, n0 = u * ${BN};
        if (u >= ${ST}) mbar_wait(barEV(s), ((u / ${ST}) + 1) & 1, 4, u - ${ST}); // V of tile u - ${ST} released
        unsigned char* dv = sV + s * ${BN * VS * 128};
        for (int c = tid; c < ${BN} * CH; c += 128) {
          const int r = c / CH, ch = c % CH; const bool ok = n0 + r < S;
          cp16(dv + tofs(${BN}, r, ch), vb + (ok ? (long long)(n0 + r) * vsl : 0LL) + ch * 8, ok);
        }
        cp_arrive(barV(s));
      }
    }
    // exit only once nothing of ours is pending: the copies landed and the consumers released the last V
    // (they waited on every full barrier before, so every deferred arrival has been counted)
    cp_wait_all();
    if (nt > 0) mbar_wait(barEV((nt - 1) % ${ST}), ((nt - 1) / ${ST}) & 1, 4, nt - 1);
    return;
`}  }
  // ---- consumers: warpgroup cw owns rows m0 + 64·cw .. +63; this thread rows rowA and rowA + 8 ----
  reg_alloc<${RC_}>();
  const int cw = wg - 1, wt = tid & 127, warp = wt >> 5, lane = wt & 31, g = lane >> 2, tg = lane & 3;
  int rowA = 0, gt = 0, qs = 0; // gt: tiles of the earlier work items (ring slots and phases); qs: the item's Q buffer
  const ${MT}* mb = MK;
  u32 aQ = smem_u32(sQ) + cw * 64 * 128;
  const u32 aK = smem_u32(sK), aV = smem_u32(sV);
  float sacc[${NS}],${DP ? ` sacc2[${NS}],` : ''} oacc[${NO}];
  u32 pf[${BN / 16}][4];
  float mrow[2], lrow[2], corr[2];
  // S = Q·K(t)ᵀ into sacc (issued, not waited for; the first k-step overwrites). dummy (the deep schedule's step
  // after the last tile): Q·Q[0..BN)ᵀ, read from the item's Q tile without waiting, the result never used, so
  // that every step issues the same wgmmas (a conditional issue makes ptxas serialize them all, C7515)
  auto issueS = [&](float (&sacc)[${NS}], int t, bool dummy) {
    const int s = (gt + t) % ${ST};
    if (!dummy) mbar_wait(barK(s), ((gt + t) / ${ST}) & 1, 1, gt + t);
${TMA ? '' : '    proxy_fence(); // cp.async wrote the tile through the generic proxy, wgmma reads through the async proxy\n'}    wg_arrive();
    const u32 kb = dummy ? smem_u32(sQ) : aK + s * ${BN} * D_ * 2, ks = dummy ? ${BM * 128} : ${BN * 128};
    #pragma unroll
    for (int kk = 0; kk < D_ / 16; kk++) {
      const u64 dq = sw128_desc(aQ + (kk >> 2) * ${BM} * 128 + (kk & 3) * 32, 16, 1024);
      const u64 dk = sw128_desc(kb + (kk >> 2) * ks + (kk & 3) * 32, 16, 1024);
      if (kk == 0) wg_ss${BN}z(sacc, dq, dk); else wg_ss${BN}(sacc, dq, dk, 1);
    }
    wg_commit();
  };
  // O += P·V(t), P = pf (issued, not waited for)
  auto issuePV = [&](int t) {
    const int s = (gt + t) % ${ST};
    mbar_wait(barV(s), ((gt + t) / ${ST}) & 1, 2, gt + t);
${TMA ? '' : '    proxy_fence();\n'}    wg_arrive();
    #pragma unroll
    for (int kk = 0; kk < ${BN / 16}; kk++) {
      const u64 dv = sw128_desc(aV + s * ${BN * VS * 128} + kk * 16 * 128, ${BN} * 128, 1024);
      wg_rs${ND}(oacc, pf[kk], dv);
    }
    wg_commit();
  };
  // the slot of tile t read: one arrival per warp (the wgmma wait before it is warpgroup-wide)
  auto releaseK = [&](int t) { if (lane == 0) mbar_arrive(barEK((gt + t) % ${ST})); ${P ? 'if (t == nt - 1 && lane == 0) mbar_arrive(barQE(qs)); /* and Q, after the last Q·Kᵀ */' : ''} };
  auto releaseV = [&](int t) { if (lane == 0) mbar_arrive(barEV((gt + t) % ${ST})); };
  // scale (log2 units), masks, online softmax of tile t in place: sacc becomes exp2(x - max) (fp32)
  // Without a mask, on a tile no causal/length edge crosses and with a positive scale (max commutes with
  // it), the scale is folded into the exponent's FFMA: no separate scaling pass over S.
  auto softmax = [&](float (&sacc)[${NS}], int t) {
${AB === 'nosoftmax' ? '    return;\n' : ''}    const int n0 = ${TT} * ${BN};
    const bool edge = n0 + ${BN} > S || (causal && n0 + ${BN} - 1 > m0 + cw * 64 + warp * 16);
    const bool fold = ${mask === 'none' ? '!edge && sl2 > 0.f' : 'false'};
    if (!fold) {
      #pragma unroll
      for (int j = 0; j < ${BN / 8}; j++) {
        #pragma unroll
        for (int e = 0; e < 4; e++) {
          const int row = rowA + (e >> 1) * 8, col = n0 + j * 8 + tg * 2 + (e & 1);
          float x = sacc[4 * j + e] * sl2;
          ${mask === 'none' ? '' : `if (row < L && col < S) { const long long mi = (long long)row * msl + (long long)col * mss; ${maskTerm(mask, 'x', 'mi')} }`}
          if (edge && (col >= S || (causal && col > row))) x = -INFINITY;
          sacc[4 * j + e] = x;
        }
      }
    }
    const float sc = fold ? sl2 : 1.f; // sacc holds raw scores (fold) or scaled ones
    // rows rowA (e = 0,1) and rowA + 8 (e = 2,3); the 4 lanes of a quad share a row
    #pragma unroll
    for (int r = 0; r < 2; r++) {
${SX === 'serial' ? `      float mt = -INFINITY;
      #pragma unroll
      for (int j = 0; j < ${BN / 8}; j++) mt = fmaxf(mt, fmaxf(sacc[4 * j + 2 * r], sacc[4 * j + 2 * r + 1]));` : `      // the row's max and sum over ${RP} independent partials: dependent chains of ${Math.ceil(BN / 8 / RP)}, not ${BN / 8}, instructions
      float mp[${RP}];
      #pragma unroll
      for (int i = 0; i < ${RP}; i++) mp[i] = fmaxf(sacc[4 * i + 2 * r], sacc[4 * i + 2 * r + 1]);
      #pragma unroll
      for (int j = ${RP}; j < ${BN / 8}; j++) mp[j % ${RP}] = fmaxf(mp[j % ${RP}], fmaxf(sacc[4 * j + 2 * r], sacc[4 * j + 2 * r + 1]));
      float mt = ${tree(RP, (i) => `mp[${i}]`, 'fmaxf')};`}
      mt = fmaxf(mt, __shfl_xor_sync(0xffffffffu, mt, 1));
      mt = fmaxf(mt, __shfl_xor_sync(0xffffffffu, mt, 2));
${SX === 'lazy' || SX === 'poly' ? `      // the running max moves only when the tile's exceeds it by more than ${LAZY} (log2 units), so after the
      // first tiles O is hardly ever rescaled; P ≤ 2^${LAZY} then, and O and the sum share the stale max, so the
      // result is exact (FlashAttention-4's rule)
      const float mn = mt * sc;
      const float mx = mn > mrow[r] + ${LAZY}.f ? mn : mrow[r];` : `      const float mx = fmaxf(mrow[r], mt * sc);`}
      const float mu = mx == -INFINITY ? 0.f : mx;
      corr[r] = fexp2(mrow[r] - mu);
      mrow[r] = mx;
${SX === 'serial' ? `      float ls = 0.f;
      #pragma unroll
      for (int j = 0; j < ${BN / 8}; j++) {
        const float p0 = fexp2(fmaf(sacc[4 * j + 2 * r], sc, -mu)), p1 = fexp2(fmaf(sacc[4 * j + 2 * r + 1], sc, -mu));
        sacc[4 * j + 2 * r] = p0; sacc[4 * j + 2 * r + 1] = p1;
        ls += p0 + p1;
      }` : `${ONES ? '' : `      float lp[${RP}];`}
${SX === 'poly' ? `      // on unmasked tiles a quarter of the exponentials on the FMA pipes (exp2_fma), the rest on the MUFU
      if (fold) {
${expLoop(true)}
      } else {
${expLoop(false)}
      }` : expLoop(false)}
${ONES ? '' : `      const float ls = ${tree(RP, (i) => `lp[${i}]`, '')};`}`}
${ONES ? '      // (the row sums accumulate on the tensor cores, in O\'s last columns, rescaled with O)' : '      lrow[r] = lrow[r] * corr[r] + ls;'}
    }
  };
  // P(t) into the register-A fragments (k-step j/2: a0 row g k 0-7, a1 row g+8 k 0-7, a2 row g k 8-15,
  // a3 row g+8 k 8-15)
  auto pack = [&](float (&sacc)[${NS}]) {
    #pragma unroll
    for (int j = 0; j < ${BN / 8}; j++) {
      pf[j >> 1][(j & 1) * 2] = pack2(sacc[4 * j], sacc[4 * j + 1]);
      pf[j >> 1][(j & 1) * 2 + 1] = pack2(sacc[4 * j + 2], sacc[4 * j + 3]);
    }
  };
  // O rescaled to tile t's running max before O += P(t)·V(t): issued after Q·K(t+1)ᵀ, so the multiplies
  // run while that MMA does (FlashAttention-3's order), not between P·V(t-1)'s end and the next issue
  // Skipped when no row of the warp changed its max (corr exactly 1: the product would be O itself), which
  // after the first tiles is most tiles: the branch is warp-uniform.
  auto rescale = [&]() {
    if (__ballot_sync(0xffffffffu, corr[0] != 1.f || corr[1] != 1.f) == 0u) return;
    #pragma unroll
    for (int i = 0; i < ${NO / 4}; i++) { oacc[4 * i] *= corr[0]; oacc[4 * i + 1] *= corr[0]; oacc[4 * i + 2] *= corr[1]; oacc[4 * i + 3] *= corr[1]; }
  };
${PP ? `  // ping-pong: warpgroup cw issues its MMAs after named barrier 1 + cw opened (the other warpgroup's
  // bar.arrive after issuing its own, 128 + 128 threads) and then opens the other's; consumer 1 lets
  // consumer 0 start. Both issue nt + 1 times per work item; the last turn is not passed on, so no
  // barrier is left with arrivals when an item ends (both warpgroups have the same items and tile counts).
  auto turnWait = [&]() { nb_sync(1 + cw, 256); };
  auto turnPass = [&]() { nb_arrive(2 - cw, 256); };
` : ''}${P && CHN ? chainLoop : `${P ? `  for (int it = 0; ; it++) {
    mbar_wait(barQ(0), it & 1, 0, it); // the item's index arrives with its Q
    const int w = sItem[0];
    if (w >= items) break;` : `  // one item per block (written as a loop: ptxas then allocates the masked D 256 builds without spills)
  for (int w = blockIdx.x, it = 0; w < blockIdx.x + 1; w++, it++) {`}
    item(w);
${itemStart}
    #pragma unroll
    for (int i = 0; i < ${NO}; i++) oacc[i] = acc_zero();
    lrow[0] = lrow[1] = 0.f; corr[0] = corr[1] = 1.f;
${DP ? deepLoop : `${PP ? '    if (nt > 0 && cw == 1) turnPass();\n' : ''}`}${DP ? '' : `    if (nt > 0) {${P ? '' : `
      mbar_wait(barQ(0), it & 1, 0, it);`}
${EG ? `      // this warpgroup's tiles: up to its own last row's causal edge (edge build; the item's nt is warpgroup 1's)
      const int ntw = causal ? min(nt, (min(S, m0 + 64 * (cw + 1)) + ${BN - 1}) / ${BN}) : nt;
` : ''}${firstTile}
      for (int t = 1; t < ${EG ? 'ntw' : 'nt'}; t++) {
${tileStep('')}
      }
${lastPV(EG ? 'ntw - 1' : 'nt - 1')}${EG ? `
      // the tiles past the edge (every key masked for these rows): released unread, each after its full barrier, in
      // tile order, so that this warpgroup's arrivals count in the phase of that fill (and Q's release at the last)
      for (int t = ntw; t < nt; t++) {
        const int g = gt + t, s = g % ${ST};
        mbar_wait(barK(s), (g / ${ST}) & 1, 1, g);
        releaseK(t);
        mbar_wait(barV(s), (g / ${ST}) & 1, 2, g);
        releaseV(t);
      }` : ''}
`}    }${P ? ` else if (lane == 0) mbar_arrive(barQE(0)); // no key for this item: its Q is free at once` : ''}
${SPL ? splitStore : wholeStore}
    gt += nt;
  }`}
}`;
  const sig: ArgType[] = TMA
    ? ['ptr', 'ptr', ...(P ? ['ptr' as const] : []), ...Array<ArgType>(9).fill('i64'), 'i32', 'i32', 'i32', 'i32', 'i32', 'i32', 'f32', 'i32', ...(P ? ['i32' as const] : []),
      ...(SPL ? ['i32', 'i32', 'ptr', 'ptr'] as ArgType[] : []), ...Array<ArgType>(SM90_TMA_WORDS).fill('u64')]
    : ['ptr', 'ptr', 'ptr', 'ptr', 'ptr', ...Array<ArgType>(21).fill('i64'), 'i32', 'i32', 'i32', 'i32', 'i32', 'i32', 'f32', 'i32'];
  return { src, name: 'attn_fwd90', sig };
}
