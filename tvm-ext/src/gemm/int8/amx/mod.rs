//! The int8 GEMM's tile loop on AMX (Intel Xeon since Sapphire Rapids): per
//! block of [`ROWS`] x [`NR`] of C, four 16 x 16 int32 accumulator tiles,
//! each step two A tiles (16 rows x 64 bytes of K) and two B tiles (16 quads
//! of K x 16 columns) and four `TDPBSUD` / `TDPBUSD`, 16,384 multiply-adds each.
//!
//! B is read in place: a B tile is 16 rows of a panel's quads (the layout of
//! [`PackedB`](super::PackedB) and of a convolution's input window are
//! already AMX's "VNNI" layout, rows `walk.quad_step` words apart); a block of
//! K that ends inside a tap (channels not a multiple of 64) is copied to a
//! zero-padded stage first, so no tile reads past a tap. A is re-laid once per
//! call from [`MR`]-row panels into tiles, each row's 16
//! quads contiguous (what an A tile reads): a copy of the weights per call,
//! small against the product when C has many columns, and the compile-time
//! packing stays the one every CPU reads. The epilogue is the VNNI tile's
//! (`x86.rs`), so both give the same bits.
//!
//! The loop is written once over [`Tiles`]: [`model::Model`] computes each
//! tile instruction in plain Rust (tested on every CPU), `x86::Hardware` runs
//! the instructions (tested against the model where the CPU has AMX).
use rayon::prelude::*;

use super::{Signs, Tile, Walk, MR, NR};
use crate::gemm::packed::for_each_block;
use crate::gemm::SharedMut;
use crate::isa::Isa;
use crate::job::JobError;

#[cfg(test)]
pub(crate) mod model;
#[cfg(test)]
mod tests;
#[cfg(target_arch = "x86_64")]
pub(crate) mod x86;

/// Rows and K-quads of one tile (64 bytes a row).
pub(crate) const TILE: usize = 16;
/// Rows of C per block: two A tiles.
pub(crate) const ROWS: usize = 2 * TILE;
/// Words of one A or B tile.
const TILE_WORDS: usize = TILE * TILE;

/// The eight tile registers as the loop uses them: C tiles 0-3 (`C[2h + v]`
/// for A tile `h`, B tile `v`), A tiles 4-5, B tiles 6-7, every one 16 rows of 64 bytes.
pub(crate) trait Tiles {
    /// Configures the tiles (once per thread and block of work).
    unsafe fn start(&mut self);
    /// Zeroes the four C tiles.
    unsafe fn zero(&mut self);
    /// A tile `h` from 16 rows of 16 words, contiguous.
    unsafe fn load_a(&mut self, h: usize, p: *const u32);
    /// B tile `v` from 16 rows of 16 words, `stride` words apart.
    unsafe fn load_b(&mut self, v: usize, p: *const u32, stride: usize);
    /// `C[2h + v] += A[h] · B[v]` for the four pairs, A's bytes signed and
    /// B's unsigned (`Signs::WeightsA`) or the other way round.
    unsafe fn multiply(&mut self, signs: Signs);
    /// The C tiles into `sums`: row `16h + r`, columns `16v..16v + 16`.
    unsafe fn store(&mut self, sums: &mut [[i32; NR]; ROWS]);
    /// Releases the tile state (cheaper context switches).
    unsafe fn finish(&mut self);
}

/// Blocks of K per tap: A's tiles hold 16 quads of one tap each, block `bb`
/// of tap `t` at `(t * blocks_per_tap + bb) * 2` tiles (its two halves of rows).
fn blocks_per_tap(walk: &Walk) -> usize {
    walk.per_tap.div_ceil(TILE)
}

/// Words of one row block's A tiles.
fn block_words(walk: &Walk) -> usize {
    walk.taps * blocks_per_tap(walk) * 2 * TILE_WORDS
}

/// The [`ROWS`] rows of row block `i` of A (`MR`-row panels of `kq` quads,
/// `panels` of them) as A tiles in `dst`, zeros past A's rows and each tap's
/// quads. Reads each panel once, in order; each quad's `MR` words go to `MR`
/// rows of one tile, 64 bytes apart.
fn relay_a(a: &[u32], kq: usize, panels: usize, i: usize, walk: &Walk, dst: &mut [u32]) {
    let bpt = blocks_per_tap(walk);
    dst.fill(0);
    for g in 0..ROWS / MR {
        let panel = i * (ROWS / MR) + g;
        if panel >= panels {
            break;
        }
        let src = &a[panel * kq * MR..][..kq * MR];
        let (h, row0) = ((g * MR) / TILE, (g * MR) % TILE);
        for t in 0..walk.taps {
            for cq in 0..walk.per_tap {
                let base = ((t * bpt + cq / TILE) * 2 + h) * TILE_WORDS + row0 * TILE + cq % TILE;
                let words = &src[(t * walk.per_tap + cq) * MR..][..MR];
                for (r, &w) in words.iter().enumerate() {
                    dst[base + r * TILE] = w;
                }
            }
        }
    }
}

/// `C = (accumulate ? C : row_bias or 0) + dequantize(A × B)` on `tiles`,
/// as `super::gemm_walk` (same arguments, checked by its callers); `isa`
/// picks the epilogue (AVX-512 where the CPU has it, else plain Rust).
///
/// # Safety
/// As `super::gemm_walk`; `T` runs on this CPU.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn gemm_walk<T: Tiles + Default>(
    a: super::PackedA,
    b: &[u32],
    n: usize,
    walk: Walk,
    signs: Signs,
    s: super::Scales,
    c: SharedMut,
    c_offset: usize,
    ldc: usize,
    accumulate: bool,
    row_bias: Option<&[f32]>,
    parallel: bool,
    isa: Isa,
) -> Result<(), JobError> {
    let (m, kq) = (a.rows, a.k.div_ceil(4));
    let panels = m.div_ceil(MR);
    let (bpt, words) = (blocks_per_tap(&walk), block_words(&walk));
    // A as tiles, once per call (each block of C then reads its rows' tiles).
    let mut a_tiles = vec![0u32; m.div_ceil(ROWS) * words];
    let relay = |(i, dst): (usize, &mut [u32])| relay_a(a.data, kq, panels, i, &walk, dst);
    if parallel && m > ROWS {
        a_tiles.par_chunks_mut(words).enumerate().for_each(relay);
    } else {
        a_tiles.chunks_mut(words).enumerate().for_each(relay);
    }
    let a_tiles = &a_tiles;
    for_each_block(m.div_ceil(ROWS), n.div_ceil(NR), parallel, |is, js| {
        let mut stage = [[0u32; NR]; TILE];
        let mut sums = [[0i32; NR]; ROWS];
        let mut tiles = T::default();
        tiles.start();
        for i in is {
            let a_block = &a_tiles[i * words..][..words];
            for j in js.clone() {
                let bp = &b[j * walk.panel_step..][..walk.reach()];
                tiles.zero();
                for t in 0..walk.taps {
                    for bb in 0..bpt {
                        let at = ((t * bpt + bb) * 2) * TILE_WORDS;
                        tiles.load_a(0, a_block[at..].as_ptr());
                        tiles.load_a(1, a_block[at + TILE_WORDS..].as_ptr());
                        let (first, rows) = (bb * TILE, TILE.min(walk.per_tap - bb * TILE));
                        let from = t * walk.tap_step + first * walk.quad_step;
                        let (p, stride) = if rows == TILE {
                            // The tile's last word, (TILE - 1) * quad_step + NR - 1
                            // past `from`, is a quad of the tap: inside `bp`.
                            (bp[from..].as_ptr(), walk.quad_step)
                        } else {
                            for (r, row) in stage.iter_mut().enumerate() {
                                match r < rows {
                                    true => {
                                        row.copy_from_slice(&bp[from + r * walk.quad_step..][..NR])
                                    }
                                    false => row.fill(0),
                                }
                            }
                            (stage.as_ptr() as *const u32, NR)
                        };
                        tiles.load_b(0, p, stride);
                        tiles.load_b(1, p.add(TILE), stride);
                        tiles.multiply(signs);
                    }
                }
                tiles.store(&mut sums);
                let cols = NR.min(n - j * NR);
                for (g, group) in sums.chunks_exact(MR).enumerate() {
                    let panel = i * (ROWS / MR) + g;
                    if panel >= panels {
                        break;
                    }
                    let rows = MR.min(m - panel * MR);
                    let r0 = panel * MR;
                    let tile = Tile {
                        rows,
                        cols,
                        row_scale: &s.row_scale[r0..][..rows],
                        row_off: &s.row_off[r0..][..rows],
                        col_scale: &s.col_scale[j * NR..][..cols],
                        col_off: &s.col_off[j * NR..][..cols],
                        row_bias: row_bias.map(|b| &b[r0..][..rows]),
                    };
                    // The group's rows, each `cols` long, inside the block the callers checked.
                    let cp = c.ptr_at(c_offset + r0 * ldc + j * NR);
                    super::store_sums(isa, group, cp, ldc, &tile, accumulate);
                }
            }
        }
        tiles.finish();
        Ok(())
    })
}
