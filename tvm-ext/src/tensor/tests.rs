use super::testing::Owned;
use super::*;

#[test]
fn contiguous_input_is_borrowed() {
    let mut t = Owned::new(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2]);
    let v = t.view();
    let s = input::<f32>(&v, "x").unwrap();
    assert!(matches!(s, Cow::Borrowed(_)));
    assert_eq!(&*s, &[1.0, 2.0, 3.0, 4.0]);
}

#[test]
fn strided_and_offset_input_is_gathered() {
    // A transposed 2x3 view of [[0,1,2],[3,4,5]] stored row-major, offset by one f32.
    let mut t = Owned::strided(vec![9.0f32, 0., 1., 2., 3., 4., 5.], &[3, 2], &[1, 3], 4);
    let v = t.view();
    let s = input::<f32>(&v, "x").unwrap();
    assert_eq!(&*s, &[0.0, 3.0, 1.0, 4.0, 2.0, 5.0]);
}

#[test]
fn wrong_dtype_is_a_type_error_naming_the_argument() {
    let mut t = Owned::new(vec![1i64, 2], &[2]);
    let err = input::<f32>(&t.view(), "weight").unwrap_err();
    assert_eq!(err.kind(), TYPE_ERROR);
    assert!(
        err.message()
            .contains("weight: expected dtype float32, got int64"),
        "{}",
        err.message()
    );
}

#[test]
fn strided_input_is_read_in_place() {
    // The transposed 2x3 view of the test above, plus a size-1 dimension.
    let mut t = Owned::strided(
        vec![9.0f32, 0., 1., 2., 3., 4., 5.],
        &[3, 1, 2],
        &[1, 100, 3],
        4,
    );
    let v = t.view();
    let s = strided_input::<f32>(&v, "x").unwrap();
    assert_eq!(s.shape, vec![3, 1, 2]);
    assert_eq!(s.strides, vec![1, 0, 3]);
    assert_eq!(s.data, &[0.0, 1., 2., 3., 4., 5.]);
    let mut n = Owned::strided(vec![0.0f32; 4], &[2, 2], &[-1, 2], 4);
    let err = strided_input::<f32>(&n.view(), "y").err().unwrap();
    assert!(
        err.message()
            .contains("y: negative strides are not supported"),
        "{}",
        err.message()
    );
    let mut e = Owned::new(Vec::<f32>::new(), &[0, 3]);
    assert!(strided_input::<f32>(&e.view(), "z")
        .unwrap()
        .data
        .is_empty());
}

#[test]
fn strided_output_is_refused() {
    let mut t = Owned::strided(vec![0.0f32; 6], &[3, 2], &[1, 3], 0);
    let err = output::<f32>(&t.view(), "out").unwrap_err();
    assert!(err
        .message()
        .contains("out: output tensors must be contiguous"));
}

#[test]
fn shape_checks_name_expected_and_found() {
    let mut t = Owned::new(vec![0.0f32; 6], &[2, 3]);
    let err = expect_shape(&t.view(), "h0", &[3, 2]).unwrap_err();
    assert!(err
        .message()
        .contains("h0: expected shape [3, 2], got [2, 3]"));
    let err = shape_of(&t.view(), "x", 3).unwrap_err();
    assert!(err.message().contains("x: expected rank 3, got rank 2"));
}
