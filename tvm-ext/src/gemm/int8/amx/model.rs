//! The AMX tile instructions the int8 loop uses, computed in plain Rust as
//! Intel's reference pseudocode defines them, so the loop (its relaying of A,
//! the stage, the edges) is tested on every CPU and the instructions are
//! tested against it where the CPU has them.
use super::{Tiles, ROWS, TILE};
use crate::gemm::int8::{Signs, NR};

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

    /// `C[m][n] += Σ_k Σ_i A[m][k].byte(i) * B[k][n].byte(i)`, in 32-bit
    /// wrapping sums (TDPBSUD: A signed, B unsigned; TDPBUSD the other way).
    unsafe fn multiply(&mut self, signs: Signs) {
        let a_signed = signs == Signs::WeightsA;
        for h in 0..2 {
            for v in 0..2 {
                let (a, b) = (self.tmm[4 + h], self.tmm[6 + v]);
                let c = &mut self.tmm[2 * h + v];
                for (m, c_row) in c.iter_mut().enumerate() {
                    for (n, cw) in c_row.iter_mut().enumerate() {
                        let mut sum = *cw as i32;
                        for k in 0..TILE {
                            let (x, y) = (bytes(a[m][k], a_signed), bytes(b[k][n], !a_signed));
                            for i in 0..4 {
                                sum = sum.wrapping_add(x[i] * y[i]);
                            }
                        }
                        *cw = sum as u32;
                    }
                }
            }
        }
    }

    unsafe fn store(&mut self, sums: &mut [[i32; NR]; ROWS]) {
        for (t, tile) in self.tmm[..4].iter().enumerate() {
            let (h, v) = (t / 2, t % 2);
            for (r, row) in tile.iter().enumerate() {
                for (q, &w) in row.iter().enumerate() {
                    sums[h * TILE + r][v * TILE + q] = w as i32;
                }
            }
        }
    }

    unsafe fn finish(&mut self) {}
}
