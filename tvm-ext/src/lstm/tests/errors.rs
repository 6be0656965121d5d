//! Calls that must fail, with an error that names the problem.
use super::*;
use tvm_ffi::Any;

// ---- bad input ------------------------------------------------------------------

enum Arg {
    F(Owned<f32>),
    I(Owned<i64>),
}

impl Arg {
    fn view(&mut self) -> TensorView {
        match self {
            Arg::F(o) => o.view(),
            Arg::I(o) => o.view(),
        }
    }
}

fn f(data: Vec<f32>, shape: &[i64]) -> Arg {
    Arg::F(Owned::new(data, shape))
}

fn i(data: Vec<i64>, shape: &[i64]) -> Arg {
    Arg::I(Owned::new(data, shape))
}

/// A valid uni-directional 2-layer call (B=2, T=3, I=4, H=2) with lengths and
/// biases. Tensors: 0 x, 1 lengths, 2-5 layer 0 (w_ih, w_hh, b_ih, b_hh),
/// 6-9 layer 1, 10 y, 11 h_n, 12 c_n. `edit` may change anything first.
fn call_with(edit: impl FnOnce(&mut Vec<i64>, &mut Vec<Arg>)) -> (Result<Any>, Vec<Arg>) {
    call_with_views(edit, |_| {})
}

/// As [`call_with`], and `edit_views` may then rearrange the tensor views.
fn call_with_views(
    edit: impl FnOnce(&mut Vec<i64>, &mut Vec<Arg>),
    edit_views: impl FnOnce(&mut Vec<TensorView>),
) -> (Result<Any>, Vec<Arg>) {
    let mut ints = vec![2i64, 0, 1, 1, 1, 0];
    let mut t = vec![f(vec![0.5; 24], &[2, 3, 4]), i(vec![3, 2], &[2])];
    for l in 0..2 {
        let in_l = if l == 0 { 4 } else { 2 };
        t.push(f(vec![0.1; 8 * in_l], &[8, in_l as i64]));
        t.push(f(vec![0.1; 16], &[8, 2]));
        t.push(f(vec![0.0; 8], &[8]));
        t.push(f(vec![0.0; 8], &[8]));
    }
    t.push(f(vec![f32::NAN; 12], &[2, 3, 2]));
    t.push(f(vec![f32::NAN; 8], &[2, 2, 2]));
    t.push(f(vec![f32::NAN; 8], &[2, 2, 2]));
    edit(&mut ints, &mut t);
    let mut views: Vec<TensorView> = t.iter_mut().map(|o| o.view()).collect();
    edit_views(&mut views);
    let mut args: Vec<AnyView> = ints.iter().map(AnyView::from).collect();
    args.extend(views.iter().map(AnyView::from));
    let r = function().call_packed(&args);
    (r, t)
}

fn failure(r: Result<Any>) -> tvm_ffi::Error {
    match r {
        Ok(_) => panic!("the call should fail"),
        Err(e) => e,
    }
}

fn error_of(edit: impl FnOnce(&mut Vec<i64>, &mut Vec<Arg>)) -> tvm_ffi::Error {
    failure(call_with(edit).0)
}

fn assert_msg(err: &tvm_ffi::Error, kind: tvm_ffi::ErrorKind, needle: &str) {
    assert!(err.message().starts_with("lstm: "), "{}", err.message());
    assert!(
        err.message().contains(needle),
        "{:?} lacks {needle:?}",
        err.message()
    );
    assert_eq!(err.kind(), kind, "{}", err.message());
}

#[test]
fn the_valid_baseline_call_succeeds() {
    let (r, t) = call_with(|_, _| {});
    r.unwrap();
    let Arg::F(y) = &t[10] else { unreachable!() };
    assert!(y.data.iter().all(|v| v.is_finite()));
    // Sequence 1 has length 2: its step 2 is zero.
    assert!(y.data[(3 + 2) * 2..].iter().all(|&v| v == 0.0));
    assert!(y.data[..(3 + 2) * 2].iter().all(|&v| v != 0.0));
}

#[test]
fn wrong_dtype_is_a_type_error() {
    let err = error_of(|_, t| t[3] = i(vec![0; 16], &[8, 2]));
    assert_msg(
        &err,
        TYPE_ERROR,
        "lstm: w_hh[layer 0, forward]: expected dtype float32, got int64",
    );
    let err = error_of(|_, t| t[1] = f(vec![3.0, 2.0], &[2]));
    assert_msg(
        &err,
        TYPE_ERROR,
        "lstm: lengths: expected dtype int64, got float32",
    );
    let err = error_of(|_, t| t[0] = i(vec![0; 24], &[2, 3, 4]));
    assert_msg(
        &err,
        TYPE_ERROR,
        "lstm: x: expected dtype float32, got int64",
    );
}

#[test]
fn wrong_weight_shape_names_the_weight() {
    let err = error_of(|_, t| t[7] = f(vec![0.1; 24], &[8, 3]));
    assert_msg(
        &err,
        VALUE_ERROR,
        "lstm: w_hh[layer 1, forward]: expected shape [8, 2], got [8, 3]",
    );
    let err = error_of(|_, t| t[2] = f(vec![0.1; 40], &[8, 5]));
    assert_msg(
        &err,
        VALUE_ERROR,
        "lstm: w_ih[layer 0, forward]: expected shape [8, 4], got [8, 5]",
    );
    let err = error_of(|_, t| t[5] = f(vec![0.0; 4], &[4]));
    assert_msg(
        &err,
        VALUE_ERROR,
        "lstm: b_hh[layer 0, forward]: expected shape [8], got [4]",
    );
    let err = error_of(|_, t| t[10] = f(vec![0.0; 12], &[3, 2, 2]));
    assert_msg(
        &err,
        VALUE_ERROR,
        "lstm: y: expected shape [2, 3, 2], got [3, 2, 2]",
    );
    let err = error_of(|_, t| t[11] = f(vec![0.0; 4], &[2, 2]));
    assert_msg(&err, VALUE_ERROR, "lstm: h_n: expected rank 3, got rank 2");
}

#[test]
fn lengths_out_of_range_are_refused() {
    let err = error_of(|_, t| t[1] = i(vec![3, 0], &[2]));
    assert_msg(
        &err,
        VALUE_ERROR,
        "lstm: lengths[1] = 0 is out of range 1..=3",
    );
    let err = error_of(|_, t| t[1] = i(vec![4, 2], &[2]));
    assert_msg(
        &err,
        VALUE_ERROR,
        "lstm: lengths[0] = 4 is out of range 1..=3",
    );
    let err = error_of(|_, t| t[1] = i(vec![3, 2, 1], &[3]));
    assert_msg(
        &err,
        VALUE_ERROR,
        "lstm: lengths: expected shape [2], got [3]",
    );
}

#[test]
fn flags_and_argument_count_are_checked() {
    let err = error_of(|ints, _| ints[4] = 0);
    assert_msg(
        &err,
        VALUE_ERROR,
        "lstm: expected 18 arguments for num_layers=2",
    );
    let err = error_of(|_, t| {
        t.pop();
    });
    assert_msg(&err, VALUE_ERROR, "lstm: expected 19 arguments for num_layers=2, bidirectional=0, has_biases=1, has_lengths=1, has_state=0, got 18");
    let err = error_of(|ints, _| ints[1] = 2);
    assert_msg(
        &err,
        VALUE_ERROR,
        "lstm: bidirectional: expected 0 or 1, got 2",
    );
    let err = error_of(|ints, _| ints[0] = 0);
    assert_msg(
        &err,
        VALUE_ERROR,
        "lstm: num_layers: expected a value >= 1, got 0",
    );
    let err = failure(function().call_packed(&[AnyView::from(&1i64)]));
    assert_msg(&err, VALUE_ERROR, "lstm: expected at least 6 arguments");
    let one = 1i64;
    let mut x = Owned::new(vec![0.0f32; 2], &[1, 1, 2]);
    let xv = x.view();
    let args = [
        AnyView::from(&one),
        AnyView::from(&0i64),
        AnyView::from(&0i64),
        AnyView::from(&0i64),
        AnyView::from(&0i64),
        AnyView::from(&0i64),
        AnyView::from(&one),
        AnyView::from(&xv),
        AnyView::from(&xv),
        AnyView::from(&xv),
        AnyView::from(&xv),
        AnyView::from(&xv),
    ];
    let err = failure(function().call_packed(&args));
    assert_msg(&err, TYPE_ERROR, "lstm: x: expected a tensor");
}

#[test]
fn time_zero_and_aliasing_are_refused() {
    // T = 0.
    let err = error_of(|_, t| t[0] = f(vec![], &[2, 0, 4]));
    assert_msg(
        &err,
        VALUE_ERROR,
        "lstm: x: the sequence length must be at least 1",
    );
    // The same tensor as h_n and c_n, or as an input and an output.
    let err = failure(call_with_views(|_, _| {}, |v| v[12] = v[11]).0);
    assert_msg(
        &err,
        VALUE_ERROR,
        "lstm: h_n: output memory overlaps output c_n",
    );
    let with_state = |ints: &mut Vec<i64>, t: &mut Vec<Arg>| {
        ints[5] = 1;
        t.insert(2, f(vec![0.0; 8], &[2, 2, 2]));
        t.insert(3, f(vec![0.0; 8], &[2, 2, 2]));
    };
    call_with(with_state).0.unwrap();
    let err = failure(call_with_views(with_state, |v| v[13] = v[2]).0);
    assert_msg(
        &err,
        VALUE_ERROR,
        "lstm: h_n: output memory overlaps input h0",
    );
    // Plain entry point: a buffer of the wrong size.
    let case = Case::new(1, false, true, 1, 2, 2, 2);
    let data = make_data(&case, 3);
    let w = weights(&case, &data);
    let mut y = vec![0.0; 3];
    let (mut hn, mut cn) = (vec![0.0; 2], vec![0.0; 2]);
    let err = lstm_forward(
        &case.cfg(),
        &data.x,
        None,
        None,
        &w,
        &mut y,
        &mut hn,
        &mut cn,
    )
    .unwrap_err();
    assert_msg(&err, VALUE_ERROR, "lstm: y: expected 4 elements");
}

#[test]
fn absurd_sizes_are_errors_not_panics() {
    let case = Case::new(1, false, true, 1, 2, 2, 2);
    let data = make_data(&case, 3);
    let w = weights(&case, &data);
    let (mut y, mut hn, mut cn) = (vec![0.0; 4], vec![0.0; 2], vec![0.0; 2]);
    for cfg in [
        LstmConfig {
            num_layers: usize::MAX,
            ..case.cfg()
        },
        LstmConfig {
            hidden_size: usize::MAX / 2,
            ..case.cfg()
        },
        LstmConfig {
            batch: usize::MAX / 3,
            seq_len: usize::MAX / 3,
            ..case.cfg()
        },
        LstmConfig {
            num_layers: 0,
            ..case.cfg()
        },
        LstmConfig {
            hidden_size: 0,
            ..case.cfg()
        },
    ] {
        let err =
            lstm_forward(&cfg, &data.x, None, None, &w, &mut y, &mut hn, &mut cn).unwrap_err();
        assert_eq!(err.kind(), VALUE_ERROR);
        assert!(err.message().starts_with("lstm: "), "{}", err.message());
    }
}
