use super::*;

/// Error of `got` in float32 units in the last place of the exact value `want`.
fn ulp_error(got: f32, want: f64) -> f64 {
    let exponent = ((want.abs().to_bits() >> 52) & 0x7ff) as i32 - 1023;
    let ulp = 2f64.powi(exponent.max(-126) - 23);
    (got as f64 - want).abs() / ulp
}

/// Max ulp error of [`sin_fast`] over every `step`-th float32 in `[lo, hi]`, both signs.
fn max_error(lo: f32, hi: f32, step: u32) -> (f64, f32) {
    let mut worst = (0.0, 0.0f32);
    let mut bits = lo.to_bits();
    while bits <= hi.to_bits() {
        let x = f32::from_bits(bits);
        for x in [x, -x] {
            let e = ulp_error(sin_fast(x), (x as f64).sin());
            if e > worst.0 {
                worst = (e, x);
            }
        }
        bits = match bits.checked_add(step) {
            Some(b) => b,
            None => break,
        };
    }
    worst
}

#[test]
fn within_two_ulp_on_a_sample_of_the_fast_range() {
    // Every 61st float up to the limit: ~1.8e7 points over all binades. Under an emulated CPU
    // (scripts/test-portability.sh sets TVM_EXT_EXPECT_ISA) every 997th, ~1.1e6 points: the
    // emulation checks the fallback code, at a twentieth of the instructions.
    let step = if std::env::var_os("TVM_EXT_EXPECT_ISA").is_some() {
        997
    } else {
        61
    };
    let (e, x) = max_error(0.0, FAST_LIMIT, step);
    assert!(e <= 2.0, "{e} ulp at x = {x:e}");
}

#[test]
fn near_multiples_of_half_pi_keep_their_relative_accuracy() {
    // The float32s below 1e4 nearest a multiple of pi/2, and their neighbours.
    for x in [
        252.898_2f32,
        4.712_389,
        1_011.592_8,
        14.137_167,
        std::f32::consts::FRAC_PI_2,
        std::f32::consts::PI,
        9_999.999,
    ] {
        let mut b = x.to_bits() - 64;
        while b <= x.to_bits() + 64 {
            let v = f32::from_bits(b);
            for v in [v, -v] {
                let e = ulp_error(sin_fast(v), (v as f64).sin());
                assert!(e <= 2.0, "{e} ulp at x = {v:e}");
            }
            b += 1;
        }
    }
}

#[test]
#[ignore = "exhaustive, ~3 minutes in release: cargo test -p tvm-ext --release -- --ignored every_float"]
fn within_two_ulp_on_every_float_of_the_fast_range() {
    let (e, x) = max_error(0.0, FAST_LIMIT, 1);
    eprintln!("sin_fast: max {e} ulp at x = {x:e}");
    assert!(e <= 2.0, "{e} ulp at x = {x:e}");
}

#[test]
fn any_argument_through_the_dispatching_sine() {
    // Large arguments take the slow path and are correct there too.
    for x in [
        1.0e4f32,
        1.2e4,
        1.2001e4,
        3.0e4,
        1.0e6,
        16_777_216.0,
        1.0e20,
        3.4e38,
        f32::MAX,
    ] {
        for x in [x, -x] {
            let e = ulp_error(sin(x), (x as f64).sin());
            assert!(e <= 1.0, "{e} ulp at x = {x:e}");
        }
    }
    assert!(sin(f32::NAN).is_nan());
    assert!(sin(f32::INFINITY).is_nan());
    assert!(sin(f32::NEG_INFINITY).is_nan());
    assert!(
        needs_slow_path(f32::NAN) && needs_slow_path(f32::INFINITY) && needs_slow_path(1.2001e4)
    );
    assert!(!needs_slow_path(FAST_LIMIT) && !needs_slow_path(-FAST_LIMIT));
    assert_eq!(sin(0.0).to_bits(), 0.0f32.to_bits());
    assert_eq!(sin(-0.0).to_bits(), (-0.0f32).to_bits());
    // Tiny and subnormal arguments: sin x = x.
    for x in [1.0e-20f32, f32::MIN_POSITIVE, f32::from_bits(1), -3.0e-30] {
        assert_eq!(sin(x), x);
    }
}
