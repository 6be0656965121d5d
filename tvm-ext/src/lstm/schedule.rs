//! How a call runs: input projections, recurrent weight packing, and the jobs
//! per (direction, group of sequences) on rayon's pool, each step of a job
//! shared out among the threads left over when there are fewer jobs than threads.
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use super::*;

/// Gate columns per packed panel of `W_hh^T`.
pub(super) const NB: usize = 64;
/// Sequences advanced together by one recurrent mat-mul.
pub(super) const MAX_GROUP: usize = 4;
/// Fewest rows worth one input-projection task of its own.
pub(super) const MIN_PROJ_ROWS: usize = 16;

/// Writes into disjoint parts of one output buffer from several tasks.
#[derive(Clone, Copy)]
pub(super) struct SharedOut {
    ptr: *mut f32,
    len: usize,
}

// SAFETY: tasks write disjoint (row, direction) ranges and nobody reads the buffer
// while they run; see `run_recurrence`.
unsafe impl Send for SharedOut {}
unsafe impl Sync for SharedOut {}

impl SharedOut {
    /// Copies `src` to `offset`. The caller guarantees no other task touches it.
    unsafe fn write(&self, offset: usize, src: &[f32]) {
        assert!(offset <= self.len && src.len() <= self.len - offset);
        std::ptr::copy_nonoverlapping(src.as_ptr(), self.ptr.add(offset), src.len());
    }
}

/// The geometry shared by all tasks of one layer.
pub(super) struct Layer<'a> {
    isa: Isa,
    layer: usize,
    dirs: usize,
    batch: usize,
    seq_len: usize,
    hidden: usize,
    /// Gate row stride: `4H` rounded up to a multiple of [`NB`].
    gp: usize,
    batch_first: bool,
    lens: &'a [usize],
}

impl Layer<'_> {
    /// Row of `(b, t)` in `x`, `y` and the layer buffers.
    fn row(&self, b: usize, t: usize) -> usize {
        if self.batch_first {
            b * self.seq_len + t
        } else {
            t * self.batch + b
        }
    }

    /// Offset of the projected gates of `(d, b, t)`.
    fn proj_offset(&self, d: usize, b: usize, t: usize) -> usize {
        ((d * self.batch + b) * self.seq_len + t) * self.gp
    }
}

#[allow(clippy::too_many_arguments)]
pub(super) fn forward_with(
    isa: Isa,
    cfg: &LstmConfig,
    x: &[f32],
    lengths: Option<&[i64]>,
    h0c0: Option<(&[f32], &[f32])>,
    weights: &[LayerDirWeights],
    y: &mut [f32],
    h_n: &mut [f32],
    c_n: &mut [f32],
) -> Result<()> {
    let lens = validate(cfg, x, lengths, h0c0, weights, y, h_n, c_n)?;
    let (batch, seq_len, hidden) = (cfg.batch, cfg.seq_len, cfg.hidden_size);
    let dirs = cfg.directions();
    if batch == 0 {
        return Ok(());
    }
    let dh = dirs * hidden;
    let gp = (4 * hidden).div_ceil(NB) * NB;
    let geometry = |layer| Layer {
        isa,
        layer,
        dirs,
        batch,
        seq_len,
        hidden,
        gp,
        batch_first: cfg.batch_first,
        lens: &lens,
    };

    // Sequences longest first, dealt round-robin into groups that run in
    // parallel; the active ones of a group at step t are then a prefix.
    let mut order: Vec<usize> = (0..batch).collect();
    order.sort_by_key(|&b| std::cmp::Reverse(lens[b]));
    let threads = rayon::current_num_threads().max(1);
    let groups_per_dir = batch.min(threads.div_ceil(dirs)).max(1);
    let groups: Vec<Vec<usize>> = (0..groups_per_dir)
        .map(|g| {
            order
                .iter()
                .copied()
                .skip(g)
                .step_by(groups_per_dir)
                .collect()
        })
        .collect();
    let tasks: Vec<(usize, &[usize])> = (0..dirs)
        .flat_map(|d| groups.iter().map(move |grp| (d, &grp[..])))
        .collect();
    // With a task per thread, each task runs its (layer, direction, group)
    // from packing to the last step on its own, in one parallel region per
    // layer and with its projections still in its cache. With fewer tasks than
    // threads the projections are computed first by all threads.
    let fused = tasks.len() >= threads;
    // With fewer tasks, the threads left over share out each task's steps.
    let helpers = threads / tasks.len() - 1;

    let mut prev = AlignedBuf::scratch(0);
    for layer in 0..cfg.num_layers {
        let g = geometry(layer);
        let last = layer + 1 == cfg.num_layers;
        let (inp, in_size) = if layer == 0 {
            (x, cfg.input_size)
        } else {
            (&prev[..], dh)
        };
        let lw = &weights[layer * dirs..(layer + 1) * dirs];

        let mut buf = AlignedBuf::scratch(0);
        let out: &mut [f32] = if last {
            &mut *y
        } else {
            buf = AlignedBuf::scratch(batch * seq_len * dh);
            &mut buf
        };
        // Padded steps are zero; the recurrence writes every other row.
        for (b, &len) in lens.iter().enumerate() {
            for t in len..seq_len {
                let r = g.row(b, t) * dh;
                out[r..r + dh].fill(0.0);
            }
        }
        let shared = SharedOut {
            ptr: out.as_mut_ptr(),
            len: out.len(),
        };

        type Finals = Vec<(usize, Vec<f32>, Vec<f32>)>;
        let finals: Vec<(usize, Finals)> = if fused {
            tasks
                .par_iter()
                .map(|&(d, grp)| {
                    let w = &lw[d];
                    let pack = pack_recurrent(isa, w.w_hh, hidden, gp);
                    let bias = combined_bias(w, 4 * hidden);
                    let mut proj = AlignedBuf::scratch(grp.len() * seq_len * gp);
                    for (slab, &b) in proj.chunks_mut(seq_len * gp).zip(grp) {
                        project_rows(
                            &g,
                            inp,
                            in_size,
                            w.w_ih,
                            bias.as_deref(),
                            b,
                            0,
                            &mut slab[..g.lens[b] * gp],
                        );
                    }
                    let offset = |i: usize, t: usize| (i * seq_len + t) * gp;
                    (
                        d,
                        run_recurrence(&g, d, grp, &pack, &proj, offset, h0c0, shared, 0),
                    )
                })
                .collect()
        } else {
            let packs: Vec<AlignedBuf> = lw
                .par_iter()
                .map(|w| pack_recurrent(isa, w.w_hh, hidden, gp))
                .collect();
            let proj = project(&g, inp, in_size, lw);
            tasks
                .par_iter()
                .map(|&(d, grp)| {
                    let offset = |i: usize, t: usize| g.proj_offset(d, grp[i], t);
                    (
                        d,
                        run_recurrence(&g, d, grp, &packs[d], &proj, offset, h0c0, shared, helpers),
                    )
                })
                .collect()
        };
        for (d, seqs) in finals {
            for (b, hs, cs) in seqs {
                let off = ((layer * dirs + d) * batch + b) * hidden;
                h_n[off..off + hidden].copy_from_slice(&hs);
                c_n[off..off + hidden].copy_from_slice(&cs);
            }
        }
        if !last {
            prev = buf;
        }
    }
    Ok(())
}

/// `b_ih + b_hh`, or `None` without biases.
pub(super) fn combined_bias(w: &LayerDirWeights, g4: usize) -> Option<Vec<f32>> {
    match (w.b_ih, w.b_hh) {
        (None, None) => None,
        (a, b) => Some(
            (0..g4)
                .map(|r| a.map_or(0.0, |a| a[r]) + b.map_or(0.0, |b| b[r]))
                .collect(),
        ),
    }
}

/// Input projections of one layer for all directions and sequences, `[D, B, T,
/// gp]`, computed by all threads. Steps past a sequence's length are unspecified
/// and never read.
pub(super) fn project(
    g: &Layer,
    inp: &[f32],
    in_size: usize,
    lw: &[LayerDirWeights],
) -> AlignedBuf {
    let (batch, seq_len, gp) = (g.batch, g.seq_len, g.gp);
    let mut proj = AlignedBuf::scratch(g.dirs * batch * seq_len * gp);
    let biases: Vec<Option<Vec<f32>>> = lw.iter().map(|w| combined_bias(w, 4 * g.hidden)).collect();
    let total_rows: usize = g.dirs * g.lens.iter().sum::<usize>();
    let threads = rayon::current_num_threads().max(1);
    let chunk_rows = total_rows.div_ceil(threads).max(MIN_PROJ_ROWS);
    let mut tasks = Vec::new();
    for (region, slab) in proj.chunks_mut(seq_len * gp).enumerate() {
        let (d, b) = (region / batch, region % batch);
        let len = g.lens[b];
        for (ci, chunk) in slab[..len * gp].chunks_mut(chunk_rows * gp).enumerate() {
            tasks.push((d, b, ci * chunk_rows, chunk));
        }
    }
    tasks.into_par_iter().for_each(|(d, b, t0, dst)| {
        project_rows(
            g,
            inp,
            in_size,
            lw[d].w_ih,
            biases[d].as_deref(),
            b,
            t0,
            dst,
        );
    });
    proj
}

/// Projects steps `t0 .. t0 + dst.len() / gp` of sequence `b` into `dst` (row
/// stride gp): `x_t W_ih^T + bias`, zero in the padding columns.
#[allow(clippy::too_many_arguments)]
pub(super) fn project_rows(
    g: &Layer,
    inp: &[f32],
    in_size: usize,
    w_ih: &[f32],
    bias: Option<&[f32]>,
    b: usize,
    t0: usize,
    dst: &mut [f32],
) {
    let (gp, g4) = (g.gp, 4 * g.hidden);
    let rows = dst.len() / gp;
    for row in dst.chunks_exact_mut(gp) {
        match bias {
            Some(bias) => row[..g4].copy_from_slice(bias),
            // sgemm with beta = 0 overwrites these, unless in_size = 0.
            None if in_size == 0 => row[..g4].fill(0.0),
            None => {}
        }
        row[g4..].fill(0.0);
    }
    if in_size == 0 || rows == 0 {
        return;
    }
    // Step between consecutive time steps of one sequence, in input rows.
    let t_step = if g.batch_first { 1 } else { g.batch };
    let first = g.row(b, t0) * in_size;
    let last = (g.row(b, t0 + rows - 1) + 1) * in_size;
    assert!(
        last <= inp.len()
            && w_ih.len() == g4 * in_size
            && dst.len() == rows * gp
            && t0 + rows <= g.seq_len
    );
    let beta = if bias.is_some() { 1.0 } else { 0.0 };
    // SAFETY: A reads rows (b, t0..t0+rows) of `inp`, all within `first..last`;
    // B is W_ih^T read through swapped strides of the [4H, in] matrix; C is
    // `rows` x 4H inside `dst` with row stride gp >= 4H.
    unsafe {
        matrixmultiply::sgemm(
            rows,
            in_size,
            g4,
            1.0,
            inp[first..].as_ptr(),
            (t_step * in_size) as isize,
            1,
            w_ih.as_ptr(),
            1,
            in_size as isize,
            beta,
            dst.as_mut_ptr(),
            gp as isize,
            1,
        );
    }
}

/// `W_hh` `[4H, H]` as panels `[gp / NB][H][NB]`: panel `p`, row `k` holds
/// `W_hh[p*NB .. p*NB+NB, k]`, zero past row 4H.
pub(super) fn pack_recurrent(isa: Isa, w_hh: &[f32], hidden: usize, gp: usize) -> AlignedBuf {
    let g4 = 4 * hidden;
    assert!(w_hh.len() == g4 * hidden && gp >= g4 && gp.is_multiple_of(NB));
    let mut packed = AlignedBuf::scratch(gp * hidden);
    for (p, panel) in packed.chunks_mut(hidden * NB).enumerate() {
        let rows = NB.min(g4 - p * NB);
        if rows < NB {
            for line in panel.chunks_exact_mut(NB) {
                line[rows..].fill(0.0);
            }
        }
        let src = &w_hh[p * NB * hidden..(p * NB + rows) * hidden];
        // Full square blocks with SIMD where available (8x8 with AVX2, 4x4
        // with NEON), the rest one by one.
        type Transpose = unsafe fn(*const f32, usize, *mut f32, usize);
        let block: Option<(usize, Transpose)> = match isa {
            Isa::Portable => None,
            // Both x86 SIMD sets imply AVX2.
            #[cfg(target_arch = "x86_64")]
            _ => Some((8, x86::avx2::transpose8)),
            #[cfg(target_arch = "aarch64")]
            Isa::Neon | Isa::Dotprod | Isa::I8mm | Isa::NeonBf16 => Some((4, arm::transpose4)),
        };
        let (rows_n, k_n) = block.map_or((0, 0), |(n, _)| (rows / n * n, hidden / n * n));
        if let Some((n, transpose)) = block {
            for c0 in (0..rows_n).step_by(n) {
                for k0 in (0..k_n).step_by(n) {
                    // SAFETY: the instruction set was detected. The block reads
                    // src rows c0..c0+n, columns k0..k0+n (inside `src`:
                    // c0+n <= rows, k0+n <= hidden) and writes panel rows
                    // k0..k0+n, columns c0..c0+n (inside `panel`: NB columns).
                    unsafe {
                        transpose(
                            src.as_ptr().add(c0 * hidden + k0),
                            hidden,
                            panel.as_mut_ptr().add(k0 * NB + c0),
                            NB,
                        )
                    }
                }
            }
        }
        for (c, row) in src.chunks_exact(hidden).enumerate() {
            let k_from = if c < rows_n { k_n } else { 0 };
            for (k, &v) in row.iter().enumerate().skip(k_from) {
                panel[k * NB + c] = v;
            }
        }
    }
    packed
}

/// Panels of one gate inside a block of hidden units: `count` panels from
/// panel `first` of the packed `W_hh^T`, written at `local` of the block's gates.
struct PanelRun {
    first: usize,
    count: usize,
    local: usize,
}

/// Hidden units updated together, and the gate columns they need.
struct UnitBlock {
    units: std::ops::Range<usize>,
    runs: Vec<PanelRun>,
    /// Floats of this block's gates per sequence, laid out `[i | f | g | o]`.
    width: usize,
}

/// How a step is cut up. `shared` among threads and `H` a multiple of [`NB`]:
/// blocks of `NB` units, each reading one panel per gate (256 KiB of `W_hh` at
/// H = 256: a thread keeps its own blocks' weights in its L2 cache); otherwise
/// one block of every unit, one product over every panel.
fn unit_blocks(h: usize, gp: usize, shared: bool) -> Vec<UnitBlock> {
    if shared && h.is_multiple_of(NB) {
        (0..h / NB)
            .map(|q| UnitBlock {
                units: q * NB..(q + 1) * NB,
                runs: (0..4)
                    .map(|gate| PanelRun {
                        first: gate * h / NB + q,
                        count: 1,
                        local: gate * NB,
                    })
                    .collect(),
                width: 4 * NB,
            })
            .collect()
    } else {
        vec![UnitBlock {
            units: 0..h,
            runs: vec![PanelRun {
                first: 0,
                count: gp / NB,
                local: 0,
            }],
            width: gp,
        }]
    }
}

/// The recurrence's state, written by several threads in turn: two buffers of
/// hidden states (step `s` reads `h[s % 2]` and writes `h[(s + 1) % 2]`) and the
/// cell states, `[sequence][H]` each.
#[derive(Clone, Copy)]
struct SharedState {
    h: [*mut f32; 2],
    c: *mut f32,
    len: usize,
}

// SAFETY: within a step the threads write disjoint unit ranges of `h[(s+1)%2]`
// and `c` and only read `h[s%2]`; a step starts after every block of the one
// before is done (an acquire of its count); see `run_recurrence`.
unsafe impl Send for SharedState {}
unsafe impl Sync for SharedState {}

impl SharedState {
    /// Hidden states read at step `s`, all of sequence `i`.
    unsafe fn h_read(&self, s: usize, i: usize, hidden: usize) -> &[f32] {
        assert!((i + 1) * hidden <= self.len);
        std::slice::from_raw_parts(self.h[s % 2].add(i * hidden), hidden)
    }

    /// Units `u` of sequence `i`: (its cell state, the hidden state written at step `s`).
    #[allow(clippy::mut_from_ref)]
    unsafe fn unit_mut(
        &self,
        s: usize,
        i: usize,
        hidden: usize,
        u: &std::ops::Range<usize>,
    ) -> (&mut [f32], &mut [f32]) {
        assert!(u.start <= u.end && u.end <= hidden && (i + 1) * hidden <= self.len);
        let at = i * hidden + u.start;
        (
            std::slice::from_raw_parts_mut(self.c.add(at), u.len()),
            std::slice::from_raw_parts_mut(self.h[(s + 1) % 2].add(at), u.len()),
        )
    }
}

/// Runs direction `d` over the sequences `grp` (longest first) and writes their
/// hidden states to rows of `out`; returns each sequence's final `(b, h, c)`.
/// The projected gates of `grp[i]` at step `t` start at `proj_offset(i, t)`.
///
/// Each step's unit blocks are claimed by up to `helpers + 1` threads: every
/// thread takes its own blocks first, then any left, and moves to the next
/// step once all are done. A thread waits only for blocks another running
/// thread has claimed, so the call finishes even if no helper ever starts
/// (the caller then does every block). Every gate sums in the same order
/// whoever computes it: the same bits on any number of threads.
#[allow(clippy::too_many_arguments)]
pub(super) fn run_recurrence(
    g: &Layer,
    d: usize,
    grp: &[usize],
    pack: &[f32],
    proj: &[f32],
    proj_offset: impl Fn(usize, usize) -> usize + Sync,
    h0c0: Option<(&[f32], &[f32])>,
    out: SharedOut,
    helpers: usize,
) -> Vec<(usize, Vec<f32>, Vec<f32>)> {
    let (h, gp) = (g.hidden, g.gp);
    let n = grp.len();
    let max_len = grp.first().map_or(0, |&b| g.lens[b]);
    // Sequence i runs steps first(i) .. max_len (reverse) or 0 .. len (forward).
    let steps = |i: usize| {
        let len = g.lens[grp[i]];
        if d == 0 {
            0..len
        } else {
            max_len - len..max_len
        }
    };
    let mut hb = [vec![0.0f32; n * h], vec![0.0f32; n * h]];
    let mut cs = vec![0.0f32; n * h];
    if let Some((h0, c0)) = h0c0 {
        for (i, &b) in grp.iter().enumerate() {
            let off = ((g.layer * g.dirs + d) * g.batch + b) * h;
            hb[steps(i).start % 2][i * h..(i + 1) * h].copy_from_slice(&h0[off..off + h]);
            cs[i * h..(i + 1) * h].copy_from_slice(&c0[off..off + h]);
        }
    }
    let blocks = unit_blocks(h, gp, helpers > 0);
    let nb = blocks.len();
    let claimed: Vec<AtomicBool> = (0..max_len * nb).map(|_| AtomicBool::new(false)).collect();
    let done: Vec<AtomicUsize> = (0..max_len).map(|_| AtomicUsize::new(0)).collect();
    let [h_a, h_b] = &mut hb;
    let state = SharedState {
        h: [h_a.as_mut_ptr(), h_b.as_mut_ptr()],
        c: cs.as_mut_ptr(),
        len: n * h,
    };
    let threads = (helpers + 1).min(nb);
    let out_stride = g.dirs * h;

    let work = |me: usize| {
        let width = blocks.iter().map(|b| b.width).max().unwrap_or(0);
        let mut gates = AlignedBuf::zeros(MAX_GROUP * width);
        let home = nb * me / threads..nb * (me + 1) / threads;
        let order: Vec<usize> = home
            .clone()
            .chain((0..nb).filter(|k| !home.contains(k)))
            .collect();
        for step in 0..max_len {
            let t = if d == 0 { step } else { max_len - 1 - step };
            // Sequences with lengths[b] > t take part in step t: a prefix of `grp`.
            // A reverse sequence joins at t = lengths[b] - 1 with its initial state.
            let active = grp.partition_point(|&b| g.lens[b] > t);
            let mut finished = 0;
            for &k in &order {
                if claimed[step * nb + k].swap(true, Ordering::Relaxed) {
                    continue;
                }
                let block = &blocks[k];
                let nu = block.units.len();
                let mut i0 = 0;
                while i0 < active {
                    let s = (active - i0).min(MAX_GROUP);
                    let mut hv: [&[f32]; MAX_GROUP] = [&[]; MAX_GROUP];
                    for (j, v) in hv.iter_mut().enumerate().take(s) {
                        // SAFETY: h[step % 2] is only read during this step.
                        *v = unsafe { state.h_read(step, i0 + j, h) };
                    }
                    for run in &block.runs {
                        let cols = run.first * NB..(run.first + run.count) * NB;
                        let mut init: [&[f32]; MAX_GROUP] = [&[]; MAX_GROUP];
                        for (j, r) in init.iter_mut().enumerate().take(s) {
                            let off = proj_offset(i0 + j, t);
                            *r = &proj[off + cols.start..off + cols.end];
                        }
                        recurrent_matmul(
                            g.isa,
                            &pack[cols.start * h..cols.end * h],
                            h,
                            &init[..s],
                            &hv[..s],
                            &mut gates[run.local..s * block.width],
                            block.width,
                        );
                    }
                    for j in 0..s {
                        let i = i0 + j;
                        // SAFETY: this thread claimed block k of this step: its
                        // units of c and of h[(step + 1) % 2] are its own.
                        let (ci, hi) = unsafe { state.unit_mut(step, i, h, &block.units) };
                        cell(
                            g.isa,
                            &gates[j * block.width..j * block.width + 4 * nu],
                            ci,
                            hi,
                        );
                        // SAFETY: row (b, t), columns of direction d and these
                        // units belong to this block alone: b is in one group of
                        // direction d, and t is visited once.
                        unsafe {
                            out.write(
                                g.row(grp[i], t) * out_stride + d * h + block.units.start,
                                hi,
                            )
                        };
                    }
                    i0 += s;
                }
                finished += 1;
            }
            if finished > 0 {
                done[step].fetch_add(finished, Ordering::Release);
            }
            // Every block of this step is claimed by now, by threads computing them.
            let mut spins = 0u32;
            while done[step].load(Ordering::Acquire) < nb {
                spins += 1;
                if spins < 1 << 12 {
                    std::hint::spin_loop();
                } else {
                    std::thread::yield_now();
                }
            }
        }
    };
    if threads <= 1 {
        work(0);
    } else {
        rayon::scope(|scope| {
            for me in 1..threads {
                let work = &work;
                scope.spawn(move |_| work(me));
            }
            work(0);
        });
    }
    grp.iter()
        .enumerate()
        .map(|(i, &b)| {
            let last = hb[steps(i).end % 2][i * h..(i + 1) * h].to_vec();
            (b, last, cs[i * h..(i + 1) * h].to_vec())
        })
        .collect()
}
