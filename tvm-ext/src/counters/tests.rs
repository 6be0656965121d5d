//! The counters through the registry, as compiled code calls the kernels: each
//! call's FLOPs and bytes against counts worked out by hand, and outputs that
//! do not change when counting is on.
use super::*;
use crate::precision::bench::{conv, matmul};

/// Counting is process-wide; tests that switch it take turns (other tests'
/// kernels may be counted meanwhile, which changes nothing they compute).
static SWITCH: Mutex<()> = Mutex::new(());

fn counted<T>(f: impl FnOnce() -> T) -> (T, Option<(&'static str, Work)>) {
    let _turn = SWITCH.lock().unwrap_or_else(|e| e.into_inner());
    set(true);
    let out = f();
    let last = last_call();
    set(false);
    (out, last)
}

// (transpose, cin, cout, L, k, stride, pad, dilation, groups, output_padding, bias)

#[test]
fn conv1d_counts_its_direct_multiply_adds() {
    // cin 40, cout 36, L 10, k 3, pad 1: 10 output columns, each 36 x 40 x 3 multiply-adds.
    let (_, last) = counted(|| conv("", (false, 40, 36, 10, 3, 1, 1, 1, 1, 0, true), 1));
    let (kernel, work) = last.unwrap();
    assert_eq!(kernel, "kokoro_tvm_ext.conv1d");
    assert_eq!(work.class, "im2col conv");
    assert_eq!(work.flops, 2 * 36 * 10 * 40 * 3); // 86 400
                                                  // x 40 x 10 and out 36 x 10 in f32, w 36 x 40 x 3 in f32.
    assert_eq!(work.bytes, 4 * (400 + 360) + 4 * 4320);
}

#[test]
fn an_int8_call_counts_one_byte_per_weight() {
    let (_, last) = counted(|| conv("int8", (false, 40, 36, 10, 3, 1, 1, 1, 1, 0, true), 1));
    let (kernel, work) = last.unwrap();
    assert_eq!(kernel, "kokoro_tvm_ext.conv1d_int8");
    assert_eq!(work.flops, 86_400);
    assert_eq!(work.bytes, 4 * (400 + 360) + 4320);
}

#[test]
fn a_transposed_convolution_counts_every_input_column_times_every_tap() {
    // cin 48, cout 32, L 5, k 4, stride 2, pad 1: out (5-1)*2 - 2 + 3 + 1 = 10 columns.
    let (_, last) = counted(|| conv("", (true, 48, 32, 5, 4, 2, 1, 1, 1, 0, false), 1));
    let (kernel, work) = last.unwrap();
    assert_eq!(kernel, "kokoro_tvm_ext.conv1d_transpose");
    assert_eq!(work.class, "transposed conv");
    assert_eq!(work.flops, 2 * 48 * 5 * 32 * 4); // 61 440
    assert_eq!(work.bytes, 4 * (48 * 5 + 32 * 10) + 4 * 32 * 48 * 4);
}

#[test]
fn the_istft_shape_has_a_row_of_its_own() {
    // Kokoro's inverse STFT: 22 channels (11 bins, re and im) to one, 20 taps at hop 5.
    let (_, last) = counted(|| conv("", (true, 22, 1, 8, 20, 5, 0, 1, 1, 0, false), 1));
    let (_, work) = last.unwrap();
    assert_eq!(work.class, "iSTFT");
    assert_eq!(work.flops, 2 * 22 * 8 * 20);
}

#[test]
fn matmul_counts_rows_by_k_by_n() {
    let (_, last) = counted(|| matmul("bf16", (3, 40, 48), 1));
    let (kernel, work) = last.unwrap();
    assert_eq!(kernel, "kokoro_tvm_ext.matmul_bf16");
    assert_eq!(work.class, "matmul");
    assert_eq!(work.flops, 2 * 3 * 40 * 48); // 11 520
    assert_eq!(work.bytes, 4 * (3 * 40 + 3 * 48) + 2 * 40 * 48);
}

#[test]
fn counting_changes_no_output_bit() {
    let shapes = [
        (false, 64, 48, 37, 7, 1, 3, 2, 1, 0, true),
        (true, 64, 48, 9, 6, 3, 2, 1, 1, 0, true),
    ];
    for precision in ["", "bf16", "int8"] {
        for s in shapes {
            let (off, _) = conv(precision, s, 1);
            let ((on, _), last) = counted(|| conv(precision, s, 1));
            assert!(last.is_some(), "{precision} {s:?}: not counted");
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&off), bits(&on), "{precision} {s:?}");
        }
    }
    let (off, _) = matmul("int8", (5, 64, 40), 1);
    let ((on, _), _) = counted(|| matmul("int8", (5, 64, 40), 1));
    assert_eq!(off, on);
}

#[test]
fn totals_read_as_json_and_reset() {
    let _turn = SWITCH.lock().unwrap_or_else(|e| e.into_inner());
    set(true);
    conv("", (false, 40, 36, 10, 3, 1, 1, 1, 1, 0, true), 1);
    set(false);
    let json = read_json();
    assert!(
        json.contains("\"kernel\":\"kokoro_tvm_ext.conv1d\",\"class\":\"im2col conv\""),
        "{json}"
    );
    assert!(
        json.contains("\"phases\":[{\"phase\":\"int8 quantize+pack activations\""),
        "{json}"
    );
    reset();
    assert!(read_json().starts_with("{\"kernels\":[],"));
}

#[test]
fn off_counts_nothing() {
    let _turn = SWITCH.lock().unwrap_or_else(|e| e.into_inner());
    LAST.with(|l| l.set(None));
    conv("", (false, 40, 36, 10, 3, 1, 1, 1, 1, 0, true), 1);
    assert_eq!(last_call(), None);
}

/// The small calls the roofline table shows slow per FLOP: the inverse STFT's
/// transposed convolution (f32 in every mode) and the style matmuls (one row):
/// `cargo test --release -p tvm-ext bench_small_calls -- --ignored --nocapture`
#[test]
#[ignore]
fn bench_small_calls() {
    let median = |mut t: Vec<f64>| {
        t.sort_by(f64::total_cmp);
        t[t.len() / 2] * 1e3
    };
    for l in [4801, 14401] {
        for p in ["", "bf16"] {
            let (_, t) = conv(p, (true, 22, 1, l, 20, 5, 0, 1, 1, 0, true), 21);
            println!("iSTFT L {l} {p:>4}: {:.3} ms", median(t));
        }
    }
    // The f32 calls of fewer than 32 channels at 48 tokens: noise_convs[0] and [1], conv_post.
    for s in [
        (false, 22, 256, 15601, 12, 6, 3, 1, 1, 0, true),
        (false, 22, 128, 15601, 1, 1, 0, 1, 1, 0, true),
        (false, 128, 22, 15601, 7, 1, 3, 1, 1, 0, true),
    ] {
        let (_, t) = conv("", s, 11);
        println!("small conv {s:?}: {:.3} ms", median(t));
    }
    for n in [256, 1024, 2048] {
        for p in ["", "bf16", "int8"] {
            let (_, t) = matmul(p, (1, 128, n), 51);
            println!("matmul 1x128x{n} {p:>4}: {:.3} ms", median(t));
        }
    }
}

/// One inverse-STFT call at 48 tokens' length, for instruction counts:
/// `valgrind --tool=callgrind <test binary> --ignored --exact counters::tests::istft_once`
#[test]
#[ignore]
fn istft_once() {
    conv("", (true, 22, 1, 15601, 20, 5, 0, 1, 1, 0, true), 1);
}
