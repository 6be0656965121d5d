//! Reading a packed call's arguments against its [`Interface`].
//!
//! A kernel reads its arguments in call order through one [`Cursor`], by name:
//! `int`, `flag`, `float`, `string` for the leading scalars, then `tensor`,
//! `optional_tensor` and `output`. Each read must name the interface's next
//! parameter with its kind; a parser that disagrees with its interface fails
//! with an internal error naming both, so the tables Python reads
//! (`interface.rs`) cannot drift from what the kernels parse. Once the scalars
//! are read, the argument count is checked against the flags before any tensor
//! is read. User errors read "who: name: expected ..., got ...".
use tvm_ffi::{
    bail, ensure, Any, AnyView, Function, Result, TensorView, INTERNAL_ERROR, TYPE_ERROR,
    VALUE_ERROR,
};

use crate::interface::{self, Entry, Interface, Kind, Param, When};

/// One parameter of the call, after the flags decided what is present.
struct Slot {
    param: Param,
    present: bool,
    /// The name in messages: the parameter's, with the group index for repeats.
    label: String,
}

/// Reads one call's packed arguments in order; see the module docs.
pub struct Cursor<'a, 'b> {
    iface: &'static Interface,
    args: &'b [AnyView<'a>],
    /// The leading scalar parameters.
    scalars: Vec<Param>,
    /// Values of the ints and flags read so far, for conditions and repeats.
    values: Vec<(&'static str, i64)>,
    /// The tensor parameters, laid out once every scalar is read.
    slots: Option<Vec<Slot>>,
    /// Index of the next scalar, then of the next slot.
    next: usize,
    /// Index of the next argument.
    arg: usize,
}

/// The parameters of `e` as a slice.
fn entry_params(e: &Entry) -> &[Param] {
    match e {
        Entry::One(p) => std::slice::from_ref(p),
        Entry::Group { params, .. } => params,
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        "argument"
    } else {
        "arguments"
    }
}

impl<'a, 'b> Cursor<'a, 'b> {
    /// A cursor over `args`; fails if they cannot even hold the leading scalars
    /// (or, for interfaces without optional parts, if the count is not exact).
    pub fn new(iface: &'static Interface, args: &'b [AnyView<'a>]) -> Result<Self> {
        let scalars: Vec<Param> = iface
            .entries
            .iter()
            .flat_map(entry_params)
            .take_while(|p| p.kind.is_scalar())
            .copied()
            .collect();
        let fixed = iface
            .entries
            .iter()
            .all(|e| matches!(e, Entry::One(p) if p.when == When::Always));
        let c = Self {
            iface,
            args,
            scalars,
            values: Vec::new(),
            slots: None,
            next: 0,
            arg: 0,
        };
        if fixed {
            let all: Vec<&str> = iface
                .entries
                .iter()
                .flat_map(entry_params)
                .map(|p| p.name)
                .collect();
            ensure!(
                args.len() == all.len(),
                VALUE_ERROR,
                "{}: expected {} {}{}, got {}",
                iface.name,
                all.len(),
                plural(all.len()),
                if all.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", all.join(", "))
                },
                args.len()
            );
        } else {
            let n = c.scalars.len();
            ensure!(
                args.len() >= n,
                VALUE_ERROR,
                "{}: expected at least {n} {} ({}), got {}",
                iface.name,
                plural(n),
                c.scalars
                    .iter()
                    .map(|p| p.name)
                    .collect::<Vec<_>>()
                    .join(", "),
                args.len()
            );
        }
        Ok(c)
    }

    /// The kernel's name, for messages.
    pub fn who(&self) -> &'static str {
        self.iface.name
    }

    fn mismatch(&self, name: &str, kind: Kind, found: Option<(&Param, bool)>) -> tvm_ffi::Error {
        let found = match found {
            Some((p, true)) => format!("{} `{}`", p.kind.name(), p.name),
            Some((p, false)) => format!("{} `{}`, absent in this call", p.kind.name(), p.name),
            None => "the end of the parameters".into(),
        };
        tvm_ffi::Error::new(
            INTERNAL_ERROR,
            &format!(
                "{}: internal error: the parser reads {} `{name}` where the interface has {found}",
                self.iface.name,
                kind.name()
            ),
            "",
        )
    }

    /// The next scalar argument, after checking that the interface's next
    /// parameter is `name` of `kind`.
    fn scalar(&mut self, name: &str, kind: Kind) -> Result<AnyView<'a>> {
        match self.scalars.get(self.next) {
            Some(p) if self.slots.is_none() && p.name == name && p.kind == kind => {}
            other => {
                let found = if self.slots.is_some() {
                    None
                } else {
                    other.map(|p| (p, true))
                };
                return Err(self.mismatch(name, kind, found));
            }
        }
        self.next += 1;
        self.arg += 1;
        Ok(self.args[self.arg - 1])
    }

    fn record(&mut self, name: &'static str, v: i64) {
        self.values.push((name, v));
    }

    fn raw_int(&mut self, name: &str, kind: Kind) -> Result<i64> {
        let v = match i64::try_from(self.scalar(name, kind)?) {
            Ok(v) => v,
            Err(e) => bail!(
                TYPE_ERROR,
                "{}: {name}: expected an int, {}",
                self.iface.name,
                e.message()
            ),
        };
        let key = self.scalars[self.next - 1].name;
        self.record(key, v);
        Ok(v)
    }

    /// A prim int.
    pub fn int(&mut self, name: &str) -> Result<i64> {
        self.raw_int(name, Kind::Int)
    }

    /// A prim int in `lo..=hi`.
    pub fn int_in(&mut self, name: &str, lo: i64, hi: i64) -> Result<i64> {
        let v = self.int(name)?;
        ensure!(
            (lo..=hi).contains(&v),
            VALUE_ERROR,
            "{}: {name}: expected a value in [{lo}, {hi}], got {v}",
            self.iface.name
        );
        Ok(v)
    }

    /// A 0/1 flag.
    pub fn flag(&mut self, name: &str) -> Result<bool> {
        let v = self.raw_int(name, Kind::Flag)?;
        ensure!(
            v == 0 || v == 1,
            VALUE_ERROR,
            "{}: {name}: expected 0 or 1, got {v}",
            self.iface.name
        );
        Ok(v == 1)
    }

    /// A prim float.
    pub fn float(&mut self, name: &str) -> Result<f64> {
        match f64::try_from(self.scalar(name, Kind::Float)?) {
            Ok(v) => Ok(v),
            Err(e) => bail!(
                TYPE_ERROR,
                "{}: {name}: expected a float, {}",
                self.iface.name,
                e.message()
            ),
        }
    }

    /// A string.
    pub fn string(&mut self, name: &str) -> Result<String> {
        match tvm_ffi::String::try_from(self.scalar(name, Kind::Str)?) {
            Ok(s) => Ok(s.as_str().to_string()),
            Err(e) => bail!(
                TYPE_ERROR,
                "{}: {name}: expected a string, {}",
                self.iface.name,
                e.message()
            ),
        }
    }

    fn value(&self, name: &str) -> Result<i64> {
        match self.values.iter().find(|(n, _)| *n == name) {
            Some((_, v)) => Ok(*v),
            None => bail!(
                INTERNAL_ERROR,
                "{}: internal error: `{name}` decides which arguments are present but was not read",
                self.iface.name
            ),
        }
    }

    fn present(&self, when: When) -> Result<bool> {
        Ok(match when {
            When::Always => true,
            When::Flag(f) => self.value(f)? == 1,
            When::Equals(n, v) => self.value(n)? == v,
        })
    }

    /// Lays out the tensor parameters once every scalar is read, after checking
    /// the argument count.
    fn layout(&mut self) -> Result<()> {
        if self.slots.is_some() {
            return Ok(());
        }
        if let Some(p) = self.scalars.get(self.next) {
            bail!(
                INTERNAL_ERROR,
                "{}: internal error: the parser reads tensors before the {} `{}`",
                self.iface.name,
                p.kind.name(),
                p.name
            );
        }
        // Count first, so an absurd repeat count is refused before any allocation.
        let mut expected = self.scalars.len() as u128;
        let mut deciding: Vec<&'static str> = Vec::new();
        let mut decide = |n: &'static str| {
            if !deciding.contains(&n) {
                deciding.push(n);
            }
        };
        for e in self.iface.entries {
            let (times, params) = match e {
                Entry::One(p) if p.kind.is_scalar() => continue,
                Entry::One(p) => (1u128, std::slice::from_ref(p)),
                Entry::Group { axes, params, .. } => {
                    let mut times = 1u128;
                    for a in *axes {
                        decide(a.count);
                        times *= (self.value(a.count)? + a.plus).clamp(0, u32::MAX as i64) as u128;
                    }
                    (times, *params)
                }
            };
            for p in params {
                match p.when {
                    When::Always => {}
                    When::Flag(n) | When::Equals(n, _) => decide(n),
                }
                expected += times * self.present(p.when)? as u128;
            }
        }
        if expected != self.args.len() as u128 {
            // Name the scalars that decide the count, in interface order.
            let mut told = Vec::new();
            for p in &self.scalars {
                if deciding.contains(&p.name) {
                    told.push(format!("{}={}", p.name, self.value(p.name)?));
                }
            }
            bail!(
                VALUE_ERROR,
                "{}: expected {expected} {} for {}, got {}",
                self.iface.name,
                plural(expected as usize),
                told.join(", "),
                self.args.len()
            );
        }
        let mut slots = Vec::new();
        for e in self.iface.entries {
            match e {
                Entry::One(p) if p.kind.is_scalar() => {}
                Entry::One(p) => slots.push(Slot {
                    param: *p,
                    present: self.present(p.when)?,
                    label: p.name.into(),
                }),
                Entry::Group { axes, params, .. } => {
                    let counts: Vec<usize> = axes
                        .iter()
                        .map(|a| Ok((self.value(a.count)? + a.plus).max(0) as usize))
                        .collect::<Result<_>>()?;
                    let total: usize = counts.iter().product();
                    for flat in 0..total {
                        // The last axis varies fastest.
                        let mut rest = flat;
                        let mut index = vec![0; axes.len()];
                        for (i, n) in counts.iter().enumerate().rev() {
                            index[i] = rest % n;
                            rest /= n;
                        }
                        let at: Vec<String> = axes
                            .iter()
                            .zip(&index)
                            .map(|(a, &i)| match a.labels.get(i) {
                                Some(l) => l.to_string(),
                                None => format!("{} {i}", a.index),
                            })
                            .collect();
                        for p in *params {
                            let label = format!("{}[{}]", p.name, at.join(", "));
                            slots.push(Slot {
                                param: *p,
                                present: self.present(p.when)?,
                                label,
                            });
                        }
                    }
                }
            }
        }
        self.slots = Some(slots);
        self.next = 0;
        Ok(())
    }

    /// The next slot, which must be `name` of `kind`; `None` when absent in this call.
    fn slot(&mut self, name: &str, kind: Kind, optional: bool) -> Result<Option<TensorView>> {
        self.layout()?;
        let slots = self.slots.as_ref().expect("laid out");
        let ok = match slots.get(self.next) {
            Some(s) => s.param.name == name && s.param.kind == kind && (optional || s.present),
            None => false,
        };
        if !ok {
            let found = slots.get(self.next).map(|s| (&s.param, s.present));
            return Err(self.mismatch(name, kind, found));
        }
        let slot = &slots[self.next];
        self.next += 1;
        if !slot.present {
            return Ok(None);
        }
        let arg = self.args[self.arg];
        self.arg += 1;
        match TensorView::try_from(arg) {
            Ok(t) => Ok(Some(t)),
            Err(e) => bail!(
                TYPE_ERROR,
                "{}: {}: expected a tensor, {}",
                self.iface.name,
                slot.label,
                e.message()
            ),
        }
    }

    /// An input tensor the interface always passes here.
    pub fn tensor(&mut self, name: &str) -> Result<TensorView> {
        Ok(self.slot(name, Kind::Tensor, false)?.expect("present"))
    }

    /// An input tensor that is present only under its interface condition.
    pub fn optional_tensor(&mut self, name: &str) -> Result<Option<TensorView>> {
        self.slot(name, Kind::Tensor, true)
    }

    /// A destination tensor.
    pub fn output(&mut self, name: &str) -> Result<TensorView> {
        Ok(self.slot(name, Kind::Output, false)?.expect("present"))
    }

    /// Checks that every parameter was read.
    pub fn finish(mut self) -> Result<()> {
        self.layout()?;
        let slots = self.slots.as_ref().expect("laid out");
        if let Some(s) = slots.get(self.next) {
            bail!(
                INTERNAL_ERROR,
                "{}: internal error: the parser never reads the {} `{}`",
                self.iface.name,
                s.param.kind.name(),
                s.param.name
            );
        }
        Ok(())
    }
}

/// The bytes a piece of memory occupies, `None` when empty: see [`span`] and
/// [`crate::tensor::byte_span`].
pub type Span = Option<(usize, usize)>;

/// A registered destination-passing kernel: `run` reads and checks the call's
/// arguments and writes its outputs; the call returns nothing.
pub fn dps_function(run: fn(&[AnyView]) -> Result<()>) -> Function {
    Function::from_packed(move |args: &[AnyView]| -> Result<Any> {
        run(args)?;
        Ok(Any::default())
    })
}

/// A registered query without arguments: `answer()`, once the (empty) call is
/// checked against `iface`.
pub fn query_function(iface: &'static Interface, answer: fn() -> Any) -> Function {
    Function::from_packed(move |args: &[AnyView]| -> Result<Any> {
        Cursor::new(iface, args)?.finish()?;
        Ok(answer())
    })
}

/// The registered `kokoro_tvm_ext.kernel_interfaces() -> str`: the interfaces
/// as JSON. Here rather than in `interface.rs`, so that `interface.rs`, which
/// this module reads, imports nothing back.
pub fn interfaces_function() -> Function {
    query_function(&interface::KERNEL_INTERFACES, || {
        Any::from(tvm_ffi::String::from(interface::to_json().as_str()))
    })
}

/// The bytes of a slice.
pub fn span<T>(s: &[T]) -> Span {
    if s.is_empty() {
        None
    } else {
        let start = s.as_ptr() as usize;
        Some((start, start + std::mem::size_of_val(s)))
    }
}

fn overlaps(a: Span, b: Span) -> bool {
    match (a, b) {
        (Some((a0, a1)), Some((b0, b1))) => a0 < b1 && b0 < a1,
        _ => false,
    }
}

/// Checks that no output shares memory with another output or with an input:
/// kernels write outputs while still reading inputs.
pub fn no_overlap(who: &str, outs: &[(&str, Span)], ins: &[(&str, Span)]) -> Result<()> {
    for (i, (oname, o)) in outs.iter().enumerate() {
        for (other, p) in &outs[i + 1..] {
            ensure!(
                !overlaps(*o, *p),
                VALUE_ERROR,
                "{who}: {oname}: output memory overlaps output {other}"
            );
        }
        for (iname, p) in ins {
            ensure!(
                !overlaps(*o, *p),
                VALUE_ERROR,
                "{who}: {oname}: output memory overlaps input {iname}"
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interface::{ADAIN, BATCH_MATMUL, LSTM, MATMUL};
    use crate::tensor::testing::Owned;

    fn message(r: Result<impl Sized>) -> String {
        match r {
            Ok(_) => panic!("expected an error"),
            Err(e) => format!("{}: {}", e.kind(), e.message()),
        }
    }

    #[test]
    fn reads_follow_the_interface_and_presence_follows_the_flags() {
        let mut x = Owned::new(vec![0.0f32; 2], &[1, 2]);
        let mut w = Owned::new(vec![0.0f32; 2], &[2, 1]);
        let mut out = Owned::new(vec![0.0f32; 1], &[1, 1]);
        let (xv, wv, ov) = (x.view(), w.view(), out.view());
        let zero = 0i64;
        let args = [
            AnyView::from(&zero),
            AnyView::from(&xv),
            AnyView::from(&wv),
            AnyView::from(&ov),
        ];
        let mut c = Cursor::new(&MATMUL, &args).unwrap();
        assert!(!c.flag("has_bias").unwrap());
        assert_eq!(c.tensor("x").unwrap().shape(), &[1, 2]);
        c.tensor("w").unwrap();
        assert!(c.optional_tensor("bias").unwrap().is_none());
        assert_eq!(c.output("out").unwrap().shape(), &[1, 1]);
        c.finish().unwrap();
    }

    #[test]
    fn a_parser_that_disagrees_with_its_interface_is_an_internal_error() {
        let mut x = Owned::new(vec![0.0f32; 2], &[1, 2]);
        let xv = x.view();
        let zero = 0i64;
        let args = [
            AnyView::from(&zero),
            AnyView::from(&xv),
            AnyView::from(&xv),
            AnyView::from(&xv),
        ];
        let mut c = Cursor::new(&MATMUL, &args).unwrap();
        assert_eq!(
            message(c.int("has_bias")),
            "InternalError: matmul: internal error: the parser reads int `has_bias` where the \
             interface has flag `has_bias`"
        );
        let mut c = Cursor::new(&MATMUL, &args).unwrap();
        c.flag("has_bias").unwrap();
        c.tensor("x").unwrap();
        assert!(message(c.tensor("weight"))
            .contains("reads tensor `weight` where the interface has tensor `w`"));
        let mut c = Cursor::new(&MATMUL, &args).unwrap();
        c.flag("has_bias").unwrap();
        c.tensor("x").unwrap();
        c.tensor("w").unwrap();
        assert!(message(c.tensor("bias")).contains("tensor `bias`, absent in this call"));
        let mut c = Cursor::new(&MATMUL, &args).unwrap();
        c.flag("has_bias").unwrap();
        c.tensor("x").unwrap();
        assert!(message(c.finish()).contains("the parser never reads the tensor `w`"));
        assert!(message(Cursor::new(&BATCH_MATMUL, &args[..0]))
            .contains("batch_matmul: expected 5 arguments (trans_x, trans_y, x, y, out), got 0"));
    }

    #[test]
    fn the_count_is_checked_against_the_deciding_scalars() {
        let (act, aff) = (1i64, 1i64);
        let (eps, slope) = (1e-5f64, 0.2f64);
        let args = [
            AnyView::from(&act),
            AnyView::from(&aff),
            AnyView::from(&eps),
            AnyView::from(&slope),
        ];
        let mut c = Cursor::new(&ADAIN, &args).unwrap();
        assert_eq!(c.int("act").unwrap(), 1);
        assert!(c.flag("has_norm_affine").unwrap());
        c.float("eps").unwrap();
        c.float("slope").unwrap();
        assert_eq!(
            message(c.tensor("x")),
            "ValueError: adain: expected 11 arguments for act=1, has_norm_affine=1, got 4"
        );
        assert!(message(Cursor::new(&ADAIN, &args[..3])).contains(
            "adain: expected at least 4 arguments (act, has_norm_affine, eps, slope), got 3"
        ));
        let bad = 2i64;
        let args = [
            AnyView::from(&act),
            AnyView::from(&bad),
            AnyView::from(&eps),
            AnyView::from(&slope),
        ];
        let mut c = Cursor::new(&ADAIN, &args).unwrap();
        c.int("act").unwrap();
        assert_eq!(
            message(c.flag("has_norm_affine")),
            "ValueError: adain: has_norm_affine: expected 0 or 1, got 2"
        );
        let mut c = Cursor::new(&ADAIN, &args).unwrap();
        assert!(message(c.float("act")).starts_with("InternalError"));
    }

    #[test]
    fn repeated_groups_are_labelled_by_their_index() {
        let flags = [2i64, 1, 0, 0, 0, 0];
        let mut t = Owned::new(vec![0.0f32; 1], &[1]);
        let tv = t.view();
        let two = 2i64;
        let mut args: Vec<AnyView> = flags.iter().map(AnyView::from).collect();
        // x, 2 layers x 2 directions x (w_ih, w_hh), y, h_n, c_n; one weight is not a tensor.
        for i in 0..12 {
            args.push(if i == 4 {
                AnyView::from(&two)
            } else {
                AnyView::from(&tv)
            });
        }
        let mut c = Cursor::new(&LSTM, &args).unwrap();
        assert_eq!(c.int("num_layers").unwrap(), 2);
        for name in [
            "bidirectional",
            "batch_first",
            "has_biases",
            "has_lengths",
            "has_state",
        ] {
            c.flag(name).unwrap();
        }
        c.tensor("x").unwrap();
        for name in ["lengths", "h0", "c0"] {
            assert!(c.optional_tensor(name).unwrap().is_none());
        }
        c.tensor("w_ih").unwrap();
        c.tensor("w_hh").unwrap();
        c.optional_tensor("b_ih").unwrap();
        c.optional_tensor("b_hh").unwrap();
        c.tensor("w_ih").unwrap();
        assert!(message(c.tensor("w_hh"))
            .starts_with("TypeError: lstm: w_hh[layer 0, reverse]: expected a tensor"));
        let mut short = args.clone();
        short.pop();
        let mut c = Cursor::new(&LSTM, &short).unwrap();
        c.int("num_layers").unwrap();
        for name in [
            "bidirectional",
            "batch_first",
            "has_biases",
            "has_lengths",
            "has_state",
        ] {
            c.flag(name).unwrap();
        }
        assert!(message(c.tensor("x")).contains(
            "lstm: expected 18 arguments for num_layers=2, bidirectional=1, has_biases=0, has_lengths=0, \
             has_state=0, got 17"
        ));
    }

    #[test]
    fn overlapping_outputs_are_refused_by_name() {
        let buf = [0.0f32; 8];
        let (a, b, c) = (span(&buf[..4]), span(&buf[4..]), span(&buf[3..5]));
        no_overlap("k", &[("y", a), ("z", b)], &[("x", span(&buf[..0]))]).unwrap();
        assert!(message(no_overlap("k", &[("y", a), ("z", c)], &[]))
            .contains("k: y: output memory overlaps output z"));
        assert!(message(no_overlap("k", &[("y", b)], &[("x", c)]))
            .contains("k: y: output memory overlaps input x"));
    }
}
