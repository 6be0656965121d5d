//! Per-kernel counters for the roofline table (`bench/roofline.py`): calls,
//! wall time, FLOPs and bytes per registered kernel and class of call, and the
//! CPU time of the phases inside tiles (quantizing and packing activations,
//! Winograd's transforms, col2im).
//!
//! Off unless `KOKORO_TVM_EXT_COUNTERS=1` is set when the library registers,
//! or `kokoro_tvm_ext.counters("on")` is called. Off, a kernel call pays one
//! relaxed atomic load ([`on`]) and nothing else, and no output changes:
//! counting only reads shapes and clocks.
//!
//! ```text
//! kokoro_tvm_ext.counters(command) -> str
//!   command: "on", "off", "reset" (all return ""), or "read": a JSON object
//!   {"kernels": [{"kernel", "class", "calls", "ns", "flops", "bytes"}, ...],
//!    "phases": [{"phase", "ns"}, ...]}
//! ```
use std::cell::Cell;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tvm_ffi::{bail, Any, AnyView, Function, Result, String as FfiString, VALUE_ERROR};

use crate::args::Cursor;
use crate::conv::Conv1dConfig;
use crate::interface;

#[cfg(test)]
mod tests;

static ON: AtomicBool = AtomicBool::new(false);

/// Whether counting is on: the one load a kernel call pays when it is off.
#[inline(always)]
pub fn on() -> bool {
    ON.load(Ordering::Relaxed)
}

/// Turns counting on or off.
pub fn set(enabled: bool) {
    ON.store(enabled, Ordering::Relaxed);
}

/// Turns counting on if `KOKORO_TVM_EXT_COUNTERS` is set to anything but `0` or empty.
pub fn set_from_env() {
    if std::env::var("KOKORO_TVM_EXT_COUNTERS").is_ok_and(|v| !v.is_empty() && v != "0") {
        set(true);
    }
}

/// What one call computes: its class (a row of the table) and its work.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Work {
    pub class: &'static str,
    /// Floating-point (or integer multiply-add) operations, a multiply-add being two.
    pub flops: u64,
    /// Bytes the call must move at least: its inputs read once, its output written once.
    pub bytes: u64,
}

thread_local! {
    // The work the running kernel noted on the calling thread (parsing runs there).
    static NOTED: Cell<Option<Work>> = const { Cell::new(None) };
    // The last call counted on this thread, for tests that run beside other tests' calls.
    static LAST: Cell<Option<(&'static str, Work)>> = const { Cell::new(None) };
}

/// The kernel and work of the last call counted on this thread.
pub fn last_call() -> Option<(&'static str, Work)> {
    LAST.with(|l| l.get())
}

/// Notes the running call's work (kernels call this after parsing their arguments).
#[inline]
pub fn note(work: impl FnOnce() -> Work) {
    if on() {
        NOTED.with(|n| n.set(Some(work())));
    }
}

#[derive(Clone, Copy, Default)]
struct Totals {
    calls: u64,
    ns: u64,
    flops: u64,
    bytes: u64,
}

static TOTALS: Mutex<BTreeMap<(&'static str, &'static str), Totals>> = Mutex::new(BTreeMap::new());

/// Runs one kernel call, counted when counting is on.
#[inline]
pub fn count<T>(kernel: &'static str, call: impl FnOnce() -> T) -> T {
    if !on() {
        return call();
    }
    NOTED.with(|n| n.set(None));
    let start = Instant::now();
    let result = call();
    record(kernel, start.elapsed());
    result
}

fn record(kernel: &'static str, took: Duration) {
    let work = NOTED.with(|n| n.take()).unwrap_or(Work {
        class: "other",
        flops: 0,
        bytes: 0,
    });
    LAST.with(|l| l.set(Some((kernel, work))));
    let mut totals = TOTALS.lock().unwrap_or_else(|e| e.into_inner());
    let t = totals.entry((kernel, work.class)).or_default();
    t.calls += 1;
    t.ns += took.as_nanos() as u64;
    t.flops += work.flops;
    t.bytes += work.bytes;
}

/// Parts of a call timed inside its tiles, on every thread (CPU time, summed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// int8: quantizing a tile's activations to u8 and packing them in quads.
    QuantizePack,
    /// bf16: rounding a tile's activations to bf16 and packing them in pairs.
    Bf16Pack,
    /// Winograd: gathering and transforming inputs, transforming outputs back.
    WinogradTransforms,
    /// Transposed convolutions: scattering the product into the output (col2im).
    Col2im,
    /// AMX: re-laying a call's packed weights into tiles.
    AmxRelay,
}

const PHASES: [(Phase, &str); 5] = [
    (Phase::QuantizePack, "int8 quantize+pack activations"),
    (Phase::Bf16Pack, "bf16 round+pack activations"),
    (Phase::WinogradTransforms, "Winograd transforms"),
    (Phase::Col2im, "transposed conv col2im"),
    (Phase::AmxRelay, "AMX re-lay of weights into tiles"),
];

static PHASE_NS: [AtomicU64; PHASES.len()] = [const { AtomicU64::new(0) }; PHASES.len()];

/// Times a phase until the guard drops (nothing when counting is off).
#[inline]
pub fn phase(p: Phase) -> Option<PhaseTimer> {
    on().then(|| PhaseTimer(p, Instant::now()))
}

pub struct PhaseTimer(Phase, Instant);

impl Drop for PhaseTimer {
    fn drop(&mut self) {
        PHASE_NS[self.0 as usize].fetch_add(self.1.elapsed().as_nanos() as u64, Ordering::Relaxed);
    }
}

/// Clears every total.
pub fn reset() {
    TOTALS.lock().unwrap_or_else(|e| e.into_inner()).clear();
    for p in &PHASE_NS {
        p.store(0, Ordering::Relaxed);
    }
}

/// The totals as JSON (see the module's doc).
pub fn read_json() -> String {
    let totals = TOTALS.lock().unwrap_or_else(|e| e.into_inner());
    let kernels: Vec<String> = totals
        .iter()
        .map(|((kernel, class), t)| {
            format!(
                "{{\"kernel\":\"{kernel}\",\"class\":\"{class}\",\"calls\":{},\"ns\":{},\"flops\":{},\"bytes\":{}}}",
                t.calls, t.ns, t.flops, t.bytes
            )
        })
        .collect();
    let phases: Vec<String> = PHASES
        .iter()
        .map(|(p, name)| {
            format!(
                "{{\"phase\":\"{name}\",\"ns\":{}}}",
                PHASE_NS[*p as usize].load(Ordering::Relaxed)
            )
        })
        .collect();
    format!(
        "{{\"kernels\":[{}],\"phases\":[{}]}}",
        kernels.join(","),
        phases.join(",")
    )
}

/// The registered `kokoro_tvm_ext.counters`.
pub fn function() -> Function {
    Function::from_packed(|args: &[AnyView]| -> Result<Any> {
        let mut c = Cursor::new(&interface::COUNTERS, args)?;
        let command = c.string("command")?;
        c.finish()?;
        match command.as_str() {
            "on" => set(true),
            "off" => set(false),
            "reset" => reset(),
            "read" => return Ok(Any::from(FfiString::from(read_json().as_str()))),
            other => bail!(
                VALUE_ERROR,
                "counters: unknown command {other:?}; use \"on\", \"off\", \"reset\" or \"read\""
            ),
        }
        Ok(Any::from(FfiString::from("")))
    })
}

// ---------------------------------------------------------------------------
// The work of each kind of call.
// ---------------------------------------------------------------------------

const F32: u64 = 4;

/// A convolution's multiply-adds as a direct convolution would do them (so a
/// Winograd call's rate is its direct-equivalent rate), and its compulsory bytes
/// with weights of `weight_bytes` each.
pub fn conv_work(
    cfg: &Conv1dConfig,
    lout: usize,
    transpose: bool,
    winograd: bool,
    weight_bytes: u64,
) -> Work {
    let (b, cin, cout, k, g) = (
        cfg.batch as u64,
        cfg.in_channels as u64,
        cfg.out_channels as u64,
        cfg.kernel as u64,
        cfg.groups.max(1) as u64,
    );
    let (l, lout) = (cfg.length as u64, lout as u64);
    // Every input column meets every tap once when transposed; every output column when not.
    let macs = if transpose {
        b * cin * l * (cout / g) * k
    } else {
        b * cout * lout * (cin / g) * k
    };
    let bytes = F32 * b * (cin * l + cout * lout) + weight_bytes * cout * (cin / g) * k;
    let class = if transpose && cout == 1 && cin == 22 {
        "iSTFT"
    } else if !transpose && cin == 1 && cout == 22 {
        "STFT (sine source)"
    } else if cin < 32 || cout < 32 {
        "small conv (noise convs, post conv)"
    } else if cfg.groups > 1 {
        "grouped conv"
    } else if winograd {
        "Winograd conv"
    } else if transpose {
        "transposed conv"
    } else if cfg.kernel == 1 {
        "1x1 conv (GEMM)"
    } else {
        "im2col conv"
    };
    Work {
        class,
        flops: 2 * macs,
        bytes,
    }
}

/// `rows x k` times `k x n`.
pub fn matmul_work(rows: u64, k: u64, n: u64, weight_bytes: u64) -> Work {
    Work {
        class: "matmul",
        flops: 2 * rows * k * n,
        bytes: F32 * (rows * k + rows * n) + weight_bytes * k * n,
    }
}

/// An element-wise pass over `elements` f32 values read and written once.
pub fn elementwise_work(class: &'static str, elements: u64, flops_per_element: u64) -> Work {
    Work {
        class,
        flops: flops_per_element * elements,
        bytes: 2 * F32 * elements,
    }
}
