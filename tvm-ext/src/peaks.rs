//! This CPU's measured peaks, the roofline table's denominators
//! (`bench/roofline.py`): f32 FMA, bf16 dot (`VDPBF16PS`) and int8 dot
//! (`VPDPBUSD`) rates on 512-bit registers, and memory bandwidth, each run on
//! `threads` threads at once (the rate is their sum).
//!
//! ```text
//! kokoro_tvm_ext.measure_peaks(threads, millis) -> str
//!   JSON: {"threads", "f32_fma_gflops", "bf16_dot_gflops", "int8_dot_gops", "read_gbs", "copy_gbs"};
//!   a rate this CPU lacks the instruction for is null. `millis` per measurement.
//! ```
//!
//! The loops keep 12 independent accumulators, more than latency x ports on
//! any x86 core we target (4 cycles x 2 FMA ports), so they measure
//! throughput; an operation is a multiply or an add (an FMA lane is 2, a
//! `VDPBF16PS` lane 4, a `VPDPBUSD` lane 8). Memory: a 256 MB buffer per
//! run, far beyond any cache, summed (read) or copied (read + write counted).
use std::hint::black_box;
use std::time::{Duration, Instant};

use tvm_ffi::{Any, AnyView, Function, Result};

use crate::args::Cursor;
use crate::interface;

/// Runs `body` (which returns operations done) on `threads` threads for about
/// `millis` each; operations per second summed over the threads.
fn rate(threads: usize, millis: u64, body: fn(u64) -> u64) -> f64 {
    let budget = Duration::from_millis(millis);
    std::thread::scope(|s| {
        let runs: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(move || {
                    body(1 << 10); // warm up (clocks, caches)
                    let (mut ops, mut reps, start) = (0u64, 1u64 << 12, Instant::now());
                    while start.elapsed() < budget {
                        ops += body(reps);
                        reps = (reps * 2).min(1 << 20);
                    }
                    ops as f64 / start.elapsed().as_secs_f64()
                })
            })
            .collect();
        runs.into_iter().map(|r| r.join().unwrap_or(0.0)).sum()
    })
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;
    use std::hint::black_box;

    const ACC: usize = 12;

    #[target_feature(enable = "avx512f")]
    unsafe fn fma(reps: u64) -> u64 {
        let mut acc = [_mm512_setzero_ps(); ACC];
        let (a, b) = (
            _mm512_set1_ps(black_box(0.999)),
            _mm512_set1_ps(black_box(1e-7)),
        );
        for _ in 0..reps {
            for s in acc.iter_mut() {
                *s = _mm512_fmadd_ps(*s, a, b);
            }
        }
        black_box(acc);
        reps * ACC as u64 * 16 * 2
    }

    #[target_feature(enable = "avx512f,avx512bf16")]
    unsafe fn bf16(reps: u64) -> u64 {
        let mut acc = [_mm512_setzero_ps(); ACC];
        let one = _mm512_set1_ps(black_box(1e-3));
        let (a, b) = (_mm512_cvtne2ps_pbh(one, one), _mm512_cvtne2ps_pbh(one, one));
        for _ in 0..reps {
            for s in acc.iter_mut() {
                *s = _mm512_dpbf16_ps(*s, a, b);
            }
        }
        black_box(acc);
        reps * ACC as u64 * 16 * 4
    }

    #[target_feature(enable = "avx512f,avx512vnni")]
    unsafe fn int8(reps: u64) -> u64 {
        let mut acc = [_mm512_setzero_si512(); ACC];
        let (a, b) = (
            _mm512_set1_epi8(black_box(3)),
            _mm512_set1_epi8(black_box(-2)),
        );
        for _ in 0..reps {
            for s in acc.iter_mut() {
                *s = _mm512_dpbusd_epi32(*s, a, b);
            }
        }
        black_box(acc);
        reps * ACC as u64 * 16 * 8
    }

    pub(super) fn fma_safe(reps: u64) -> u64 {
        // SAFETY: called only where avx512f was detected (`super::measure`).
        unsafe { fma(reps) }
    }
    pub(super) fn bf16_safe(reps: u64) -> u64 {
        // SAFETY: as above, avx512bf16.
        unsafe { bf16(reps) }
    }
    pub(super) fn int8_safe(reps: u64) -> u64 {
        // SAFETY: as above, avx512vnni.
        unsafe { int8(reps) }
    }
}

const MEM_BYTES: usize = 256 << 20;

/// Bytes per second over `threads` buffers of [`MEM_BYTES`], read (`copy`: and written).
fn bandwidth(threads: usize, millis: u64, copy: bool) -> f64 {
    let words = MEM_BYTES / 8 / threads.max(1);
    let budget = Duration::from_millis(millis);
    std::thread::scope(|s| {
        let runs: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(move || {
                    let src: Vec<u64> = (0..words as u64).collect();
                    // Written once first: the first write of a fresh page faults.
                    let mut dst = src.clone();
                    dst.truncate(if copy { words } else { 0 });
                    let (mut bytes, start) = (0f64, Instant::now());
                    while start.elapsed() < budget {
                        if copy {
                            dst.copy_from_slice(&src);
                            black_box(&mut dst);
                            bytes += 16.0 * words as f64;
                        } else {
                            let mut sums = [0u64; 8];
                            for c in src.chunks_exact(8) {
                                for (s, v) in sums.iter_mut().zip(c) {
                                    *s = s.wrapping_add(*v);
                                }
                            }
                            black_box(sums);
                            bytes += 8.0 * words as f64;
                        }
                    }
                    bytes / start.elapsed().as_secs_f64()
                })
            })
            .collect();
        runs.into_iter().map(|r| r.join().unwrap_or(0.0)).sum()
    })
}

/// The peaks as JSON (see the module's doc).
pub fn measure(threads: usize, millis: u64) -> String {
    let g = |ops: Option<f64>| ops.map_or("null".to_string(), |r| format!("{:.1}", r / 1e9));
    #[allow(unused_mut)]
    let (mut f, mut b, mut i) = (None, None, None);
    #[cfg(target_arch = "x86_64")]
    {
        if is_x86_feature_detected!("avx512f") {
            f = Some(rate(threads, millis, x86::fma_safe));
            if is_x86_feature_detected!("avx512bf16") {
                b = Some(rate(threads, millis, x86::bf16_safe));
            }
            if is_x86_feature_detected!("avx512vnni") {
                i = Some(rate(threads, millis, x86::int8_safe));
            }
        }
    }
    format!(
        "{{\"threads\":{threads},\"f32_fma_gflops\":{},\"bf16_dot_gflops\":{},\"int8_dot_gops\":{},\
         \"read_gbs\":{},\"copy_gbs\":{}}}",
        g(f),
        g(b),
        g(i),
        g(Some(bandwidth(threads, millis, false))),
        g(Some(bandwidth(threads, millis, true)))
    )
}

/// The registered `kokoro_tvm_ext.measure_peaks`.
pub fn function() -> Function {
    Function::from_packed(|args: &[AnyView]| -> Result<Any> {
        let mut c = Cursor::new(&interface::MEASURE_PEAKS, args)?;
        let threads = c.int_in("threads", 1, 1024)? as usize;
        let millis = c.int_in("millis", 1, 60_000)? as u64;
        c.finish()?;
        Ok(Any::from(tvm_ffi::String::from(
            measure(threads, millis).as_str(),
        )))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_peaks_are_positive_and_the_dot_rates_present_where_the_cpu_has_them() {
        let json = measure(1, 20);
        let field = |name: &str| -> Option<f64> {
            let rest = &json[json.find(&format!("\"{name}\":"))? + name.len() + 3..];
            rest[..rest.find([',', '}'])?].parse().ok()
        };
        assert!(field("read_gbs").unwrap() > 0.1, "{json}");
        assert!(field("copy_gbs").unwrap() > 0.1, "{json}");
        #[cfg(target_arch = "x86_64")]
        {
            let have =
                |f: bool, name: &str| assert_eq!(field(name).is_some_and(|r| r > 0.1), f, "{json}");
            have(is_x86_feature_detected!("avx512f"), "f32_fma_gflops");
            have(
                is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512vnni"),
                "int8_dot_gops",
            );
        }
    }
}
