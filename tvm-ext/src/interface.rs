//! Every registered function's parameters, described once, by name.
//!
//! The kernels parse their packed arguments through `args.rs`'s cursor, which
//! checks each read against these tables (this module imports nothing from
//! it), and the global function `kokoro_tvm_ext.kernel_interfaces()`
//! (registered from `args.rs`) hands them to Python as JSON
//! (`python/kokoro_tvm_ext/plugin/kernels.py`), where the compiler passes build and
//! rewrite kernel calls by parameter name. Changing a signature here changes
//! both sides at once.
//!
//! Calling convention: scalars first (ints, flags, floats, strings; always
//! present), then tensors in order, then the outputs of destination-passing
//! kernels. A tensor may be present only when a flag is 1 ([`When::Flag`]) or
//! an int has a given value ([`When::Equals`]); a group of tensors may repeat,
//! once per combination of its axes (the LSTM's weights per layer and
//! direction).
use tvm_ffi::Result;

/// What kind of value a parameter takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A prim int.
    Int,
    /// A prim int that is 0 or 1.
    Flag,
    /// A prim float.
    Float,
    /// A string.
    Str,
    /// An input tensor.
    Tensor,
    /// A destination tensor the kernel writes.
    Output,
}

impl Kind {
    pub const fn name(self) -> &'static str {
        match self {
            Kind::Int => "int",
            Kind::Flag => "flag",
            Kind::Float => "float",
            Kind::Str => "string",
            Kind::Tensor => "tensor",
            Kind::Output => "output",
        }
    }

    /// Ints, flags, floats and strings: the leading, always-present arguments.
    pub const fn is_scalar(self) -> bool {
        !matches!(self, Kind::Tensor | Kind::Output)
    }
}

/// When a parameter is present.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum When {
    Always,
    /// When the flag of this name is 1.
    Flag(&'static str),
    /// When the int of this name has this value.
    Equals(&'static str, i64),
}

/// One parameter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Param {
    pub name: &'static str,
    pub kind: Kind,
    pub when: When,
}

/// One axis a group repeats over: `count` (an int or flag parameter) plus `plus` times.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Axis {
    /// The index's name in messages, e.g. "layer".
    pub index: &'static str,
    pub count: &'static str,
    pub plus: i64,
    /// Names for the index values (e.g. "forward", "reverse"); "{index} {i}" without.
    pub labels: &'static [&'static str],
}

/// A parameter or a repeated group of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Entry {
    One(Param),
    /// `params` once per combination of `axes`, the last axis varying fastest.
    Group {
        name: &'static str,
        axes: &'static [Axis],
        params: &'static [Param],
    },
}

/// What a function gives back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Returns {
    /// Destination-passing: writes its outputs, returns nothing.
    Outputs,
    Tensor,
    Bool,
    Int,
    Str,
}

/// One registered function's signature.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Interface {
    /// The short name; the global name is `kokoro_tvm_ext.<name>`.
    pub name: &'static str,
    pub returns: Returns,
    pub entries: &'static [Entry],
}

impl Interface {
    /// Whether a single (not grouped) parameter is named `name`.
    pub fn has(&self, name: &str) -> bool {
        self.entries
            .iter()
            .any(|e| matches!(e, Entry::One(p) if p.name == name))
    }
}

const fn param(name: &'static str, kind: Kind, when: When) -> Entry {
    Entry::One(Param { name, kind, when })
}

const fn int(name: &'static str) -> Entry {
    param(name, Kind::Int, When::Always)
}

const fn flag(name: &'static str) -> Entry {
    param(name, Kind::Flag, When::Always)
}

const fn tensor(name: &'static str) -> Entry {
    param(name, Kind::Tensor, When::Always)
}

const fn tensor_if(name: &'static str, flag: &'static str) -> Entry {
    param(name, Kind::Tensor, When::Flag(flag))
}

const fn output(name: &'static str) -> Entry {
    param(name, Kind::Output, When::Always)
}

const fn dps(name: &'static str, entries: &'static [Entry]) -> Interface {
    Interface {
        name,
        returns: Returns::Outputs,
        entries,
    }
}

pub const SNAKE: Interface = dps("snake", &[tensor("x"), tensor("alpha"), output("out")]);

pub const SOFTMAX: Interface = dps("softmax", &[tensor("x"), output("out")]);

pub const ADAIN: Interface = dps(
    "adain",
    &[
        // 0 none, 1 snake, 2 leaky_relu.
        int("act"),
        flag("has_norm_affine"),
        param("eps", Kind::Float, When::Always),
        // Always passed; read only for leaky_relu.
        param("slope", Kind::Float, When::Always),
        tensor("x"),
        tensor_if("norm_w", "has_norm_affine"),
        tensor_if("norm_b", "has_norm_affine"),
        tensor("scale"),
        tensor("shift"),
        param("alpha", Kind::Tensor, When::Equals("act", 1)),
        output("out"),
    ],
);

const LSTM_WEIGHT: Param = Param {
    name: "",
    kind: Kind::Tensor,
    when: When::Always,
};

pub const LSTM: Interface = dps(
    "lstm",
    &[
        int("num_layers"),
        flag("bidirectional"),
        flag("batch_first"),
        flag("has_biases"),
        flag("has_lengths"),
        flag("has_state"),
        tensor("x"),
        tensor_if("lengths", "has_lengths"),
        tensor_if("h0", "has_state"),
        tensor_if("c0", "has_state"),
        Entry::Group {
            name: "weights",
            axes: &[
                Axis {
                    index: "layer",
                    count: "num_layers",
                    plus: 0,
                    labels: &[],
                },
                Axis {
                    index: "direction",
                    count: "bidirectional",
                    plus: 1,
                    labels: &["forward", "reverse"],
                },
            ],
            params: &[
                Param {
                    name: "w_ih",
                    ..LSTM_WEIGHT
                },
                Param {
                    name: "w_hh",
                    ..LSTM_WEIGHT
                },
                Param {
                    name: "b_ih",
                    when: When::Flag("has_biases"),
                    ..LSTM_WEIGHT
                },
                Param {
                    name: "b_hh",
                    when: When::Flag("has_biases"),
                    ..LSTM_WEIGHT
                },
            ],
        },
        output("y"),
        output("h_n"),
        output("c_n"),
    ],
);

/// The tensors of every convolution and matmul: `x`, `w`, optional `bias`, `out`.
macro_rules! with_bias_tensors {
    ($($prim:expr),* $(,)?) => {
        &[$($prim,)* tensor("x"), tensor("w"), tensor_if("bias", "has_bias"), output("out")]
    };
}

pub const CONV1D: Interface = dps(
    "conv1d",
    with_bias_tensors![
        int("stride"),
        int("pad_left"),
        int("pad_right"),
        int("dilation"),
        int("groups"),
        flag("has_bias"),
    ],
);

pub const CONV1D_TRANSPOSE: Interface = dps(
    "conv1d_transpose",
    with_bias_tensors![
        int("stride"),
        int("pad_left"),
        int("pad_right"),
        int("output_padding"),
        int("dilation"),
        int("groups"),
        flag("has_bias"),
    ],
);

pub const MATMUL: Interface = dps("matmul", with_bias_tensors![flag("has_bias")]);

pub const BATCH_MATMUL: Interface = dps(
    "batch_matmul",
    &[
        flag("trans_x"),
        flag("trans_y"),
        tensor("x"),
        tensor("y"),
        output("out"),
    ],
);

pub const PACK_WINOGRAD: Interface = Interface {
    name: "pack_winograd",
    returns: Returns::Tensor,
    entries: &[tensor("w")],
};

/// conv1d with packed weights (Winograd, bf16, int8): `kernel_size` follows
/// `has_bias`, as `w` no longer shows it.
const PACKED_CONV1D_ARGS: &[Entry] = with_bias_tensors![
    int("stride"),
    int("pad_left"),
    int("pad_right"),
    int("dilation"),
    int("groups"),
    flag("has_bias"),
    int("kernel_size"),
];

/// conv1d_transpose with packed weights (bf16, int8), `kernel_size` as above.
const PACKED_CONV1D_TRANSPOSE_ARGS: &[Entry] = with_bias_tensors![
    int("stride"),
    int("pad_left"),
    int("pad_right"),
    int("output_padding"),
    int("dilation"),
    int("groups"),
    flag("has_bias"),
    int("kernel_size"),
];

const PACKER_ARGS: &[Entry] = &[
    param("kind", Kind::Str, When::Always),
    int("groups"),
    tensor("w"),
];

/// A compile-time weight packer (`pack_bf16`, `pack_int8`, `pack_f32`).
const fn packer(name: &'static str) -> Interface {
    Interface {
        name,
        returns: Returns::Tensor,
        entries: PACKER_ARGS,
    }
}

/// Whether a precision computes natively on this CPU (`bf16_native`, `int8_native`).
const fn native_query(name: &'static str) -> Interface {
    Interface {
        name,
        returns: Returns::Bool,
        entries: &[],
    }
}

pub const CONV1D_WINOGRAD: Interface = dps("conv1d_winograd", PACKED_CONV1D_ARGS);

pub const PACK_BF16: Interface = packer("pack_bf16");
pub const BF16_NATIVE: Interface = native_query("bf16_native");
pub const CONV1D_BF16: Interface = dps("conv1d_bf16", PACKED_CONV1D_ARGS);
pub const CONV1D_TRANSPOSE_BF16: Interface =
    dps("conv1d_transpose_bf16", PACKED_CONV1D_TRANSPOSE_ARGS);
pub const MATMUL_BF16: Interface = dps("matmul_bf16", with_bias_tensors![flag("has_bias")]);

pub const PACK_INT8: Interface = packer("pack_int8");
pub const INT8_NATIVE: Interface = native_query("int8_native");
pub const CONV1D_INT8: Interface = dps("conv1d_int8", PACKED_CONV1D_ARGS);
pub const CONV1D_TRANSPOSE_INT8: Interface =
    dps("conv1d_transpose_int8", PACKED_CONV1D_TRANSPOSE_ARGS);
pub const MATMUL_INT8: Interface = dps("matmul_int8", with_bias_tensors![flag("has_bias")]);

pub const PACK_F32: Interface = packer("pack_f32");
pub const MATMUL_PANELS: Interface = dps("matmul_panels", with_bias_tensors![flag("has_bias")]);

pub const SET_NUM_THREADS: Interface = Interface {
    name: "set_num_threads",
    returns: Returns::Int,
    entries: &[int("n")],
};

/// The precision x instruction-set table and this process's choices, as JSON
/// (`precision/table.rs`).
pub const PRECISION_KERNELS: Interface = Interface {
    name: "precision_kernels",
    returns: Returns::Str,
    entries: &[],
};

/// The roofline counters (`counters/`): "on", "off", "reset" or "read" (JSON).
pub const COUNTERS: Interface = Interface {
    name: "counters",
    returns: Returns::Str,
    entries: &[param("command", Kind::Str, When::Always)],
};

/// This CPU's measured peaks as JSON (`peaks/`).
pub const MEASURE_PEAKS: Interface = Interface {
    name: "measure_peaks",
    returns: Returns::Str,
    entries: &[int("threads"), int("millis")],
};

pub const KERNEL_INTERFACES: Interface = Interface {
    name: "kernel_interfaces",
    returns: Returns::Str,
    entries: &[],
};

/// Every registered function's interface, in the order of `lib.rs`'s tables.
pub const ALL: &[&Interface] = &[
    &SNAKE,
    &ADAIN,
    &LSTM,
    &CONV1D,
    &CONV1D_TRANSPOSE,
    &MATMUL,
    &BATCH_MATMUL,
    &SOFTMAX,
    &PACK_WINOGRAD,
    &CONV1D_WINOGRAD,
    &PACK_BF16,
    &BF16_NATIVE,
    &CONV1D_BF16,
    &CONV1D_TRANSPOSE_BF16,
    &MATMUL_BF16,
    &PACK_INT8,
    &INT8_NATIVE,
    &CONV1D_INT8,
    &CONV1D_TRANSPOSE_INT8,
    &MATMUL_INT8,
    &PACK_F32,
    &MATMUL_PANELS,
    &SET_NUM_THREADS,
    &COUNTERS,
    &KERNEL_INTERFACES,
    &PRECISION_KERNELS,
    &MEASURE_PEAKS,
];

/// The interface of the function registered as `global` (`kokoro_tvm_ext.<name>`).
pub fn find(global: &str) -> Option<&'static Interface> {
    let short = global.strip_prefix(crate::PREFIX)?;
    ALL.iter().copied().find(|i| i.name == short)
}

// ---------------------------------------------------------------------------
// JSON, read by python/kokoro_tvm_ext/plugin/kernels.py.
// ---------------------------------------------------------------------------

fn quoted(s: &str) -> String {
    // Our names are plain identifiers; escape the two characters JSON requires anyway.
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

fn param_json(p: &Param) -> String {
    let when = match p.when {
        When::Always => String::new(),
        When::Flag(f) => format!(", \"when\": {}", quoted(f)),
        When::Equals(n, v) => format!(", \"when\": {}", quoted(&format!("{n}=={v}"))),
    };
    format!(
        "{{\"name\": {}, \"kind\": {}{when}}}",
        quoted(p.name),
        quoted(p.kind.name())
    )
}

fn entry_json(e: &Entry) -> String {
    match e {
        Entry::One(p) => param_json(p),
        Entry::Group { name, axes, params } => {
            let axes: Vec<String> = axes
                .iter()
                .map(|a| {
                    let labels: Vec<String> = a.labels.iter().map(|l| quoted(l)).collect();
                    format!(
                        "{{\"index\": {}, \"count\": {}, \"plus\": {}, \"labels\": [{}]}}",
                        quoted(a.index),
                        quoted(a.count),
                        a.plus,
                        labels.join(", ")
                    )
                })
                .collect();
            let params: Vec<String> = params.iter().map(param_json).collect();
            format!(
                "{{\"name\": {}, \"kind\": \"group\", \"repeat\": {{\"axes\": [{}], \"params\": [{}]}}}}",
                quoted(name),
                axes.join(", "),
                params.join(", ")
            )
        }
    }
}

fn interface_json(i: &Interface) -> String {
    let returns = match i.returns {
        Returns::Outputs => "null",
        Returns::Tensor => "\"tensor\"",
        Returns::Bool => "\"bool\"",
        Returns::Int => "\"int\"",
        Returns::Str => "\"string\"",
    };
    let params: Vec<String> = i.entries.iter().map(entry_json).collect();
    format!(
        "{{\"global\": {}, \"dps\": {}, \"returns\": {returns}, \"params\": [{}]}}",
        quoted(&format!("{}{}", crate::PREFIX, i.name)),
        i.returns == Returns::Outputs,
        params.join(", ")
    )
}

/// All interfaces as one JSON object keyed by short name.
pub fn to_json() -> String {
    let all: Vec<String> = ALL
        .iter()
        .map(|i| format!("{}: {}", quoted(i.name), interface_json(i)))
        .collect();
    format!("{{{}}}", all.join(", "))
}

/// The interface of one function as JSON, by short or global name.
pub fn json_of(name: &str) -> Result<String> {
    let short = name.strip_prefix(crate::PREFIX).unwrap_or(name);
    match ALL.iter().find(|i| i.name == short) {
        Some(i) => Ok(interface_json(i)),
        None => tvm_ffi::bail!(
            tvm_ffi::KEY_ERROR,
            "no kernel named {name:?}; known: {}",
            ALL.iter().map(|i| i.name).collect::<Vec<_>>().join(", ")
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(i: &Interface) -> Vec<&Param> {
        i.entries
            .iter()
            .flat_map(|e| match e {
                Entry::One(p) => std::slice::from_ref(p).iter(),
                Entry::Group { params, .. } => params.iter(),
            })
            .collect()
    }

    #[test]
    fn every_registered_function_has_exactly_one_interface() {
        let mut names: Vec<&str> = ALL.iter().map(|i| i.name).collect();
        names.sort();
        // The legalization functions are the compiler's (legalize/mod.rs), not kernels.
        let mut registered: Vec<&str> = crate::function_names()
            .iter()
            .filter(|n| !n.starts_with(crate::legalize::PREFIX))
            .map(|n| n.strip_prefix(crate::PREFIX).unwrap())
            .collect();
        registered.sort();
        assert_eq!(names, registered);
    }

    #[test]
    fn scalars_lead_and_conditions_name_earlier_scalars() {
        for i in ALL {
            let ps = params(i);
            let scalars = ps.iter().take_while(|p| p.kind.is_scalar()).count();
            assert!(
                ps[scalars..].iter().all(|p| !p.kind.is_scalar()),
                "{}: a scalar follows a tensor",
                i.name
            );
            let scalar = |n: &str| ps[..scalars].iter().find(|p| p.name == n).map(|p| p.kind);
            for p in &ps {
                match p.when {
                    When::Always => {}
                    When::Flag(f) => {
                        assert_eq!(scalar(f), Some(Kind::Flag), "{}: {}", i.name, p.name)
                    }
                    When::Equals(n, _) => {
                        assert_eq!(scalar(n), Some(Kind::Int), "{}: {}", i.name, p.name)
                    }
                }
                assert!(
                    !p.kind.is_scalar() || p.when == When::Always,
                    "{}: {}",
                    i.name,
                    p.name
                );
            }
            for e in i.entries {
                if let Entry::Group { axes, .. } = e {
                    for a in *axes {
                        assert!(
                            matches!(scalar(a.count), Some(Kind::Int | Kind::Flag)),
                            "{}: {}",
                            i.name,
                            a.count
                        );
                    }
                }
            }
            let mut names: Vec<&str> = ps.iter().map(|p| p.name).collect();
            names.sort();
            names.dedup();
            assert_eq!(
                names.len(),
                ps.len(),
                "{}: duplicate parameter name",
                i.name
            );
            let outputs = ps.iter().any(|p| p.kind == Kind::Output);
            assert_eq!(outputs, i.returns == Returns::Outputs, "{}", i.name);
        }
    }

    /// Scalar values covering every presence condition and repeat count of `i`.
    fn combinations(i: &Interface) -> Vec<Vec<Value>> {
        let ps = params(i);
        let mut combos: Vec<Vec<Value>> = vec![vec![]];
        for p in ps.iter().filter(|p| p.kind.is_scalar()) {
            let tested: Vec<i64> = ps
                .iter()
                .filter_map(|q| match q.when {
                    When::Equals(n, v) if n == p.name => Some(v),
                    _ => None,
                })
                .collect();
            let choices: Vec<Value> = match p.kind {
                Kind::Flag => vec![Value::Int(0), Value::Int(1)],
                Kind::Float => vec![Value::Float(0.5)],
                Kind::Str => vec![Value::Str("matmul")],
                _ if !tested.is_empty() => {
                    let mut v = vec![0];
                    for t in tested {
                        v.extend([t, t + 1]);
                    }
                    v.sort();
                    v.dedup();
                    v.into_iter().map(Value::Int).collect()
                }
                _ if p.name == "num_layers" => vec![Value::Int(1), Value::Int(2)],
                _ if p.name == "output_padding" => vec![Value::Int(0)],
                _ => vec![Value::Int(1)],
            };
            combos = combos
                .into_iter()
                .flat_map(|c| {
                    choices.iter().map(move |v| {
                        let mut c = c.clone();
                        c.push(*v);
                        c
                    })
                })
                .collect();
        }
        combos
    }

    #[derive(Clone, Copy, Debug)]
    enum Value {
        Int(i64),
        Float(f64),
        Str(&'static str),
    }

    #[test]
    fn every_parser_reads_its_interface_for_every_flag_combination() {
        use crate::tensor::testing::Owned;
        use tvm_ffi::AnyView;
        let constructors = crate::KERNELS
            .iter()
            .chain(crate::INFO)
            .chain(crate::SETTINGS);
        for (global, make) in constructors {
            let i = find(global).unwrap();
            if i.name == "set_num_threads" {
                continue; // It would size the process's thread pool.
            }
            let f = make();
            for combo in combinations(i) {
                let ints: Vec<i64> = combo
                    .iter()
                    .map(|v| if let Value::Int(n) = v { *n } else { 0 })
                    .collect();
                let floats: Vec<f64> = combo
                    .iter()
                    .map(|v| if let Value::Float(x) = v { *x } else { 0.0 })
                    .collect();
                let strs: Vec<tvm_ffi::String> = combo
                    .iter()
                    .map(|v| tvm_ffi::String::from(if let Value::Str(s) = v { *s } else { "" }))
                    .collect();
                let mut args: Vec<AnyView> = combo
                    .iter()
                    .enumerate()
                    .map(|(k, v)| match v {
                        Value::Int(_) => AnyView::from(&ints[k]),
                        Value::Float(_) => AnyView::from(&floats[k]),
                        Value::Str(_) => AnyView::from(&strs[k]),
                    })
                    .collect();
                // As many one-element tensors as the flags ask for: the cursor walks every
                // read, so a parser that disagrees with the table fails as an internal error.
                let tensors = count_tensors(i, &combo);
                let mut owned: Vec<Owned<f32>> =
                    (0..tensors).map(|_| Owned::new(vec![0.5], &[1])).collect();
                let views: Vec<tvm_ffi::TensorView> = owned.iter_mut().map(|o| o.view()).collect();
                args.extend(views.iter().map(AnyView::from));
                if let Err(e) = f.call_packed(&args) {
                    assert_ne!(
                        e.kind(),
                        tvm_ffi::INTERNAL_ERROR,
                        "{} {combo:?}: {}",
                        i.name,
                        e.message()
                    );
                }
            }
        }
    }

    /// The tensors a call of `i` passes for these scalar values, computed from the table alone.
    fn count_tensors(i: &Interface, combo: &[Value]) -> usize {
        let scalars: Vec<&Param> = params(i)
            .into_iter()
            .filter(|p| p.kind.is_scalar())
            .collect();
        let value = |n: &str| {
            let k = scalars.iter().position(|p| p.name == n).unwrap();
            match combo[k] {
                Value::Int(v) => v,
                _ => unreachable!(),
            }
        };
        let present = |p: &Param| match p.when {
            When::Always => true,
            When::Flag(f) => value(f) == 1,
            When::Equals(n, v) => value(n) == v,
        };
        i.entries
            .iter()
            .map(|e| match e {
                Entry::One(p) if p.kind.is_scalar() => 0,
                Entry::One(p) => present(p) as usize,
                Entry::Group { axes, params, .. } => {
                    let times: i64 = axes.iter().map(|a| value(a.count) + a.plus).product();
                    times as usize * params.iter().filter(|p| present(p)).count()
                }
            })
            .sum()
    }

    #[test]
    fn json_names_every_parameter_in_order() {
        let json = to_json();
        assert!(
            json.starts_with("{\"snake\": {\"global\": \"kokoro_tvm_ext.snake\", \"dps\": true")
        );
        assert!(json.contains(
            "\"matmul\": {\"global\": \"kokoro_tvm_ext.matmul\", \"dps\": true, \"returns\": null, \
             \"params\": [{\"name\": \"has_bias\", \"kind\": \"flag\"}, {\"name\": \"x\", \"kind\": \"tensor\"}, \
             {\"name\": \"w\", \"kind\": \"tensor\"}, {\"name\": \"bias\", \"kind\": \"tensor\", \"when\": \"has_bias\"}, \
             {\"name\": \"out\", \"kind\": \"output\"}]}"
        ));
        assert!(json.contains("{\"name\": \"alpha\", \"kind\": \"tensor\", \"when\": \"act==1\"}"));
        assert!(json.contains(
            "\"axes\": [{\"index\": \"layer\", \"count\": \"num_layers\", \"plus\": 0, \"labels\": []}, \
             {\"index\": \"direction\", \"count\": \"bidirectional\", \"plus\": 1, \"labels\": [\"forward\", \"reverse\"]}]"
        ));
    }
}
