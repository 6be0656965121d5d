//! This CPU's measured peaks, the roofline table's denominators
//! (`bench/roofline.py`): f32 FMA, bf16 dot (`VDPBF16PS`) and int8 dot
//! (`VPDPBUSD`) rates on 512-bit registers, AMX's int8 and bf16 tile products
//! where the CPU has them, and memory bandwidth, each run on `threads` threads
//! at once (the rate is their sum).
//!
//! ```text
//! kokoro_tvm_ext.measure_peaks(threads, millis) -> str
//!   JSON: {"threads", "f32_fma_gflops", "bf16_dot_gflops", "int8_dot_gops", "amx_bf16_gflops",
//!          "amx_int8_gops", "read_gbs", "copy_gbs"};
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
use crate::isa::Isa;

/// Runs `body` (which returns operations done) on `threads` threads for about
/// `millis` each; operations per second summed over the threads. (Only x86's
/// loops are written: on other CPUs every compute peak is null.)
#[cfg(target_arch = "x86_64")]
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
mod x86;

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
    let (mut f, mut b, mut i, mut ab, mut ai) = (None, None, None, None, None);
    // Only the sets the kernels compute with have a loop here; elsewhere the rates stay null.
    #[cfg(target_arch = "x86_64")]
    let sets = [
        Isa::Portable,
        Isa::Avx512,
        Isa::Avx512Vnni,
        Isa::Avx512Bf16,
        Isa::AmxInt8,
        Isa::AmxBf16,
    ];
    #[cfg(not(target_arch = "x86_64"))]
    let sets = [Isa::Portable];
    for isa in sets.into_iter().filter(|s| s.detected()) {
        match isa {
            // The bandwidth below, on every CPU.
            Isa::Portable => {}
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => f = Some(rate(threads, millis, x86::fma_safe)),
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512Vnni => i = Some(rate(threads, millis, x86::int8_safe)),
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512Bf16 => b = Some(rate(threads, millis, x86::bf16_safe)),
            #[cfg(target_arch = "x86_64")]
            Isa::AmxInt8 => ai = Some(rate(threads, millis, x86::amx_int8_safe)),
            #[cfg(target_arch = "x86_64")]
            Isa::AmxBf16 => ab = Some(rate(threads, millis, x86::amx_bf16_safe)),
            #[allow(unreachable_patterns)]
            _ => {}
        }
    }
    format!(
        "{{\"threads\":{threads},\"f32_fma_gflops\":{},\"bf16_dot_gflops\":{},\"int8_dot_gops\":{},\
         \"amx_bf16_gflops\":{},\"amx_int8_gops\":{},\"read_gbs\":{},\"copy_gbs\":{}}}",
        g(f),
        g(b),
        g(i),
        g(ab),
        g(ai),
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
            have(Isa::Avx512.detected(), "f32_fma_gflops");
            have(Isa::Avx512Vnni.detected(), "int8_dot_gops");
            have(Isa::Avx512Bf16.detected(), "bf16_dot_gflops");
            have(Isa::AmxInt8.detected(), "amx_int8_gops");
            have(Isa::AmxBf16.detected(), "amx_bf16_gflops");
        }
    }
}
