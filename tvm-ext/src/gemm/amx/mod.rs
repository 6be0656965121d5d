//! The packed GEMMs' tile loop on AMX (Intel Xeon since Sapphire Rapids), for
//! int8 (`TDPBSUD`, `TDPBUSD`: 16,384 multiply-adds each) and bf16
//! (`TDPBF16PS`: 8,192): per block of [`ROWS`] x [`NR`] of C, four 16 x 16
//! 32-bit accumulator tiles; per step two A tiles (16 rows x 64 bytes of K),
//! two B tiles (16 words of K x 16 columns) and four tile products.
//!
//! Both packings keep `G` elements of K per `u32` word (int8's quads, bf16's
//! pairs), which is AMX's B layout: a B tile is 16 rows of a panel's words,
//! read in place through a [`Walk`] (a [`PackedB`](crate::gemm::int8::PackedB)
//! or a convolution's input window, rows `walk.quad_step` words apart). A block
//! of K that ends inside a tap (channels not a multiple of 16 words) is copied
//! to a zero-padded stage first, so no tile reads past a tap. A is re-laid from
//! its [`MR`]-row panels into tiles, each row's 16 words contiguous (what an A
//! tile reads), once per call, or once for all the tiles of a convolution call
//! ([`Relayed`]): a copy of the weights, small against the product, and the
//! compile-time packing stays the one every CPU reads. The epilogue is the caller's: the VNNI tile's
//! for int8 (the same bits), the f32 sums as they are for bf16.
//!
//! The loop is written once over [`Tiles`]: [`model::Model`] computes each tile
//! instruction in plain Rust (tested on every CPU), `x86::Hardware` runs the
//! instructions (tested against the model where the CPU has them).
use rayon::prelude::*;

use crate::gemm::int8::Walk;
use crate::gemm::packed::{for_each_block, MR, NR};
use crate::gemm::Relayed;
use crate::job::JobError;

#[cfg(test)]
pub(crate) mod model;
#[cfg(test)]
mod tests;
#[cfg(target_arch = "x86_64")]
pub(crate) mod x86;

/// Rows of a tile, and words of K in an A tile's row (64 bytes).
pub(crate) const TILE: usize = 16;
/// Rows of C per block: two A tiles.
pub(crate) const ROWS: usize = 2 * TILE;
/// Words of one A or B tile.
const TILE_WORDS: usize = TILE * TILE;

/// The tile product: what the words hold and how they multiply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Dot {
    /// Int8 quads, A's bytes signed, B's unsigned (`TDPBSUD`): int32 sums.
    SignedUnsigned,
    /// Int8 quads, A's bytes unsigned, B's signed (`TDPBUSD`): int32 sums.
    UnsignedSigned,
    /// Bf16 pairs (`TDPBF16PS`): f32 sums.
    Bf16,
}

/// The accumulators of one block: row `r`, column `j` of C's block, as the
/// bits of an i32 (int8) or f32 (bf16).
pub(crate) type Sums = [[u32; NR]; ROWS];

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
    /// `C[2h + v] += A[h] · B[v]` for the four pairs.
    unsafe fn multiply(&mut self, dot: Dot);
    /// The C tiles into `sums`: row `16h + r`, columns `16v..16v + 16`.
    unsafe fn store(&mut self, sums: &mut Sums);
    /// Releases the tile state (cheaper context switches).
    unsafe fn finish(&mut self);

    /// Eight rows of 16 words from their [`MR`]-row panel (`src[q * MR + r]`,
    /// 128 words) into an A tile's rows (`dst[r * TILE + q]`).
    fn transpose_block(src: &[u32], dst: &mut [u32])
    where
        Self: Sized,
    {
        transpose_words(&src[..TILE * MR], dst);
    }
}

/// Words `q` of [`MR`] rows (`src[q * MR + r]`, as many as `src` holds) into
/// tile rows (`dst[r * TILE + q]`).
fn transpose_words(src: &[u32], dst: &mut [u32]) {
    for (q, words) in src.chunks_exact(MR).enumerate() {
        for (r, &w) in words.iter().enumerate() {
            dst[r * TILE + q] = w;
        }
    }
}

/// Blocks of K per tap: A's tiles hold 16 words of one tap each, block `bb`
/// of tap `t` at `(t * blocks_per_tap + bb) * 2` tiles (its two halves of rows).
fn blocks_per_tap(walk: &Walk) -> usize {
    walk.per_tap.div_ceil(TILE)
}

/// Words of one row block's A tiles.
fn block_words(walk: &Walk) -> usize {
    walk.taps * blocks_per_tap(walk) * 2 * TILE_WORDS
}

/// The [`ROWS`] rows of row block `i` of A (`MR`-row panels of `kw` words,
/// `panels` of them) as A tiles in `dst`, which is zeros (and stays so past
/// A's rows and each tap's words): each panel's blocks of 16 words of a tap
/// become 8 rows of a tile, by `T::transpose_block` where the block is whole.
fn relay_a<T: Tiles>(a: &[u32], kw: usize, panels: usize, i: usize, walk: &Walk, dst: &mut [u32]) {
    let bpt = blocks_per_tap(walk);
    for g in 0..ROWS / MR {
        let panel = i * (ROWS / MR) + g;
        if panel >= panels {
            break;
        }
        let src = &a[panel * kw * MR..][..kw * MR];
        let (h, row0) = ((g * MR) / TILE, (g * MR) % TILE);
        for t in 0..walk.taps {
            for bb in 0..bpt {
                let to =
                    &mut dst[((t * bpt + bb) * 2 + h) * TILE_WORDS + row0 * TILE..][..MR * TILE];
                let (first, held) = (bb * TILE, TILE.min(walk.per_tap - bb * TILE));
                let from = &src[(t * walk.per_tap + first) * MR..][..held * MR];
                if held == TILE {
                    T::transpose_block(from, to);
                } else {
                    transpose_words(from, to);
                }
            }
        }
    }
}

/// All of A (`rows` rows in [`MR`]-row panels of `walk.taps * walk.per_tap`
/// words, checked to be inside `a`) as A tiles, row block after row block.
fn relay<T: Tiles>(a: &[u32], rows: usize, walk: &Walk, parallel: bool) -> Vec<u32> {
    let _timer = crate::counters::phase(crate::counters::Phase::AmxRelay);
    let (kw, panels, words) = (
        walk.taps * walk.per_tap,
        rows.div_ceil(MR),
        block_words(walk),
    );
    let mut tiles = vec![0u32; rows.div_ceil(ROWS) * words];
    let one = |(i, dst): (usize, &mut [u32])| relay_a::<T>(a, kw, panels, i, walk, dst);
    if words == 0 {
        // No K: every sum is zero, there is nothing to relay.
    } else if parallel && rows > ROWS {
        tiles.par_chunks_mut(words).enumerate().for_each(one);
    } else {
        tiles.chunks_mut(words).enumerate().for_each(one);
    }
    tiles
}

/// `C = A × B` on `tiles`, block by block: A is `rows` rows in [`MR`]-row
/// panels of `walk.taps * walk.per_tap` words each, B `n` columns read
/// through `walk` from `b`; each block's sums go to `store(sums, panel, j)`
/// for each [`MR`]-row panel of A in it (`sums` its `MR` rows) and panel `j`
/// of B's columns. `parallel` splits the blocks over the rayon pool. A is
/// re-laid as tiles for this call, or once for every call given the same
/// `shared` (which must then always come with the same A).
///
/// # Safety
/// `T` runs on this CPU; every panel of B is `walk.reach()` words inside `b`
/// (the callers check it); `store` may be called from several threads, never
/// twice for one block.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn gemm<T: Tiles + Default>(
    a: &[u32],
    rows: usize,
    b: &[u32],
    n: usize,
    walk: Walk,
    dot: Dot,
    parallel: bool,
    shared: Option<&Relayed>,
    store: impl Fn(&[[u32; NR]], usize, usize) + Sync,
) -> Result<(), JobError> {
    let kw = walk.taps * walk.per_tap;
    let panels = rows.div_ceil(MR);
    let (bpt, words) = (blocks_per_tap(&walk), block_words(&walk));
    if a.len() < panels * kw * MR {
        return Err(JobError::new(format!(
            "a packed operand of {} words does not hold {rows} rows of {kw}",
            a.len()
        )));
    }
    let own;
    let a_tiles: &[u32] = match shared {
        // On this thread alone: a thread that waited for its own parallel
        // re-laying could take another tile of the call and wait on `once` twice.
        Some(once) => once.get_or_init(|| relay::<T>(a, rows, &walk, false)),
        None => {
            own = relay::<T>(a, rows, &walk, parallel);
            &own
        }
    };
    if a_tiles.len() != rows.div_ceil(ROWS) * words {
        return Err(JobError::new(
            "A's shared tiles are of another shape".to_string(),
        ));
    }
    for_each_block(rows.div_ceil(ROWS), n.div_ceil(NR), parallel, |is, js| {
        let mut stage = [[0u32; NR]; TILE];
        let mut sums: Sums = [[0; NR]; ROWS];
        let mut tiles = T::default();
        tiles.start();
        for i in is {
            let a_block = &a_tiles[i * words..][..words];
            for j in js.clone() {
                let bp = &b[j * walk.panel_step..][..walk.reach()];
                tiles.zero();
                for t in 0..walk.taps {
                    for bb in 0..bpt {
                        let at = (t * bpt + bb) * 2 * TILE_WORDS;
                        tiles.load_a(0, a_block[at..].as_ptr());
                        tiles.load_a(1, a_block[at + TILE_WORDS..].as_ptr());
                        let (first, held) = (bb * TILE, TILE.min(walk.per_tap - bb * TILE));
                        let from = t * walk.tap_step + first * walk.quad_step;
                        let (p, stride) = if held == TILE {
                            // The tile's last word, (TILE - 1) * quad_step + NR - 1
                            // past `from`, is a word of the tap: inside `bp`.
                            (bp[from..].as_ptr(), walk.quad_step)
                        } else {
                            for (r, row) in stage.iter_mut().enumerate() {
                                match r < held {
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
                        tiles.multiply(dot);
                    }
                }
                tiles.store(&mut sums);
                for (g, group) in sums.chunks_exact(MR).enumerate() {
                    let panel = i * (ROWS / MR) + g;
                    if panel >= panels {
                        break;
                    }
                    store(group, panel, j);
                }
            }
        }
        tiles.finish();
        Ok(())
    })
}
