//! The AMX tile instructions the loop uses, computed in plain Rust as
//! Intel's reference pseudocode defines them, so the loop (its relaying of A,
//! the stage, the edges) is tested on every CPU and the instructions are
//! tested against it where the CPU has them.
use super::{Dot, Sums, Tiles, TILE};

/// Eight tiles of 16 rows of 16 words.
#[derive(Clone)]
pub(crate) struct Model {
    tmm: [[[u32; TILE]; TILE]; 8],
}

impl Default for Model {
    fn default() -> Self {
        Model {
            tmm: [[[0; TILE]; TILE]; 8],
        }
    }
}

impl Model {
    unsafe fn load(&mut self, tile: usize, p: *const u32, stride: usize) {
        for (r, row) in self.tmm[tile].iter_mut().enumerate() {
            for (q, w) in row.iter_mut().enumerate() {
                *w = *p.add(r * stride + q);
            }
        }
    }
}

/// The four bytes of a word, signed or not.
fn bytes(w: u32, signed: bool) -> [i32; 4] {
    w.to_le_bytes()
        .map(|b| if signed { b as i8 as i32 } else { b as i32 })
}

impl Tiles for Model {
    unsafe fn start(&mut self) {
        *self = Model::default();
    }

    unsafe fn zero(&mut self) {
        for t in &mut self.tmm[..4] {
            *t = [[0; TILE]; TILE];
        }
    }

    unsafe fn load_a(&mut self, h: usize, p: *const u32) {
        self.load(4 + h, p, TILE);
    }

    unsafe fn load_b(&mut self, v: usize, p: *const u32, stride: usize) {
        self.load(6 + v, p, stride);
    }

    /// Int8: `C[m][n] += Σ_k Σ_i A[m][k].byte(i) * B[k][n].byte(i)` in
    /// 32-bit wrapping sums (TDPBSUD: A signed, B unsigned; TDPBUSD the other
    /// way). Bf16: `C[m][n] += A[m][k].odd * B[k][n].odd + A[m][k].even *
    /// B[k][n].even` in f32, k in order (TDPBF16PS's pseudocode; the hardware
    /// rounds its own way, so the bf16 tests allow for it).
    unsafe fn multiply(&mut self, dot: Dot) {
        for h in 0..2 {
            for v in 0..2 {
                let (a, b) = (self.tmm[4 + h], self.tmm[6 + v]);
                let c = &mut self.tmm[2 * h + v];
                for (m, c_row) in c.iter_mut().enumerate() {
                    for (n, cw) in c_row.iter_mut().enumerate() {
                        *cw = match dot {
                            Dot::Bf16 => {
                                let half = |w: u32, odd: bool| {
                                    f32::from_bits(if odd { w & 0xffff_0000 } else { w << 16 })
                                };
                                let mut sum = f32::from_bits(*cw);
                                for k in 0..TILE {
                                    let (x, y) = (a[m][k], b[k][n]);
                                    sum += half(x, true) * half(y, true)
                                        + half(x, false) * half(y, false);
                                }
                                sum.to_bits()
                            }
                            _ => {
                                let a_signed = dot == Dot::SignedUnsigned;
                                let mut sum = *cw as i32;
                                for k in 0..TILE {
                                    let (x, y) =
                                        (bytes(a[m][k], a_signed), bytes(b[k][n], !a_signed));
                                    for i in 0..4 {
                                        sum = sum.wrapping_add(x[i] * y[i]);
                                    }
                                }
                                sum as u32
                            }
                        };
                    }
                }
            }
        }
    }

    unsafe fn store(&mut self, sums: &mut Sums) {
        for (t, tile) in self.tmm[..4].iter().enumerate() {
            let (h, v) = (t / 2, t % 2);
            for (r, row) in tile.iter().enumerate() {
                sums[h * TILE + r][v * TILE..][..TILE].copy_from_slice(row);
            }
        }
    }

    unsafe fn finish(&mut self) {}
}
