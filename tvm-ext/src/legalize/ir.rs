//! Relax IR seen from Rust: nodes read by field name through tvm-ffi's
//! reflection, and new nodes made by TVM's own constructors, which are global
//! functions of its compiler library (`ir.IntImm`, `relax.op.call_dps_packed`).
//! Nothing here knows TVM's C++ layouts, so it holds for any TVM build whose
//! node and field names are the ones below (checked by the Python tests).
use tvm_ffi::object::ObjectRef;
use tvm_ffi::tvm_ffi_sys::{TVMFFIGetTypeInfo, TVMFFITypeIndex};
use tvm_ffi::{
    Any, AnyView, Array, DLDataType, DLDataTypeCode, FieldGetter, Function, ObjectRefCore, Result,
    TYPE_ERROR,
};

/// One IR node (an expression, attrs, a type), read by field name.
#[derive(Clone)]
pub struct Node {
    object: ObjectRef,
    type_index: i32,
}

impl Node {
    /// `value` as a node; `None` if it holds no object (None, an int, ...).
    pub fn from_any(value: Any) -> Option<Node> {
        let type_index = value.type_index();
        if type_index < TVMFFITypeIndex::kTVMFFIStaticObjectBegin as i32 {
            return None;
        }
        let object = ObjectRef::try_from(value).ok()?;
        Some(Node { object, type_index })
    }

    /// `value` as a node, or a TypeError naming `what`.
    pub fn expect(value: Any, what: &str) -> Result<Node> {
        let type_index = value.type_index();
        Node::from_any(value).ok_or_else(|| {
            tvm_ffi::Error::new(
                TYPE_ERROR,
                &format!("{what}: expected an IR node, got a value of type index {type_index}"),
                "",
            )
        })
    }

    /// TVM's registered type key, e.g. `ir.Call`, `relax.TensorType`.
    pub fn type_key(&self) -> &'static str {
        // Type infos are registry-owned and live as long as the process.
        unsafe {
            let info = TVMFFIGetTypeInfo(self.type_index);
            if info.is_null() {
                return "";
            }
            (*info).type_key.as_str()
        }
    }

    /// The field `name` (declared by this node's type or a base type).
    pub fn field(&self, name: &str) -> Result<Any> {
        FieldGetter::new(self.type_index, name)?.get_any(&**ObjectRef::data(&self.object))
    }

    /// The field `name` as a node; `None` when the field holds None.
    pub fn node(&self, name: &str) -> Result<Option<Node>> {
        Ok(Node::from_any(self.field(name)?))
    }

    /// An array field, as nodes (elements that are not nodes are skipped).
    pub fn nodes(&self, name: &str) -> Result<Vec<Node>> {
        let array: Array<Any> = self.field(name)?.try_into()?;
        Ok(array.iter().filter_map(Node::from_any).collect())
    }

    pub fn string(&self, name: &str) -> Result<String> {
        let value: tvm_ffi::String = self.field(name)?.try_into()?;
        Ok(value.as_str().to_owned())
    }

    /// An array field of integers or integer constants (attrs' strides, padding, ...).
    pub fn ints(&self, name: &str) -> Result<Vec<i64>> {
        let array: Array<Any> = self.field(name)?.try_into()?;
        array
            .iter()
            .map(|item| match item.try_as::<i64>() {
                Some(value) => Ok(value),
                None => int_value(&Node::expect(item, name)?),
            })
            .collect()
    }

    pub fn as_any(&self) -> Any {
        Any::from(self.object.clone())
    }
}

/// The value of an integer constant (`ir.IntImm`); an error for anything else.
pub fn int_value(node: &Node) -> Result<i64> {
    if node.type_key() != "ir.IntImm" {
        tvm_ffi::bail!(
            TYPE_ERROR,
            "expected an integer constant, got {}",
            node.type_key()
        );
    }
    node.field("value")?.try_into()
}

/// What a tensor-typed expression is known to be.
pub struct TensorInfo {
    pub dtype: DLDataType,
    /// -1 when the rank is unknown.
    pub ndim: i64,
    /// Each dimension's value when it is a constant, else `None`.
    pub dims: Vec<Option<i64>>,
}

impl TensorInfo {
    /// The type of `expr` if it is a tensor.
    pub fn of(expr: &Node) -> Result<Option<TensorInfo>> {
        match expr.node("ty")? {
            Some(ty) => TensorInfo::from_type(&ty),
            None => Ok(None),
        }
    }

    /// `ty` read as a `relax.TensorType`; `None` for tuples, shapes, objects.
    pub fn from_type(ty: &Node) -> Result<Option<TensorInfo>> {
        if ty.type_key() != "relax.TensorType" {
            return Ok(None);
        }
        let Some(dtype) = dtype_of(ty.field("dtype")?)? else {
            return Ok(None);
        };
        let ndim: i64 = ty.field("ndim")?.try_into()?;
        let dims = match ty.node("shape")? {
            Some(shape) if shape.type_key() == "relax.expr.ShapeExpr" => shape
                .nodes("values")?
                .iter()
                .map(|d| int_value(d).ok())
                .collect(),
            _ => vec![None; ndim.max(0) as usize],
        };
        Ok(Some(TensorInfo { dtype, ndim, dims }))
    }

    pub fn is_f32(&self) -> bool {
        is_f32(self.dtype)
    }
}

/// The dimensions of a `relax.TensorType` as expressions; `None` when its shape is not a `ShapeExpr`.
pub fn shape_values(ty: &Node) -> Result<Option<Vec<Any>>> {
    match ty.node("shape")? {
        Some(shape) if shape.type_key() == "relax.expr.ShapeExpr" => {
            let values: Array<Any> = shape.field("values")?.try_into()?;
            Ok(Some(values.iter().collect()))
        }
        _ => Ok(None),
    }
}

pub const F32: DLDataType = DLDataType {
    code: DLDataTypeCode::kDLFloat as u8,
    bits: 32,
    lanes: 1,
};

pub fn is_f32(dtype: DLDataType) -> bool {
    dtype.code == DLDataTypeCode::kDLFloat as u8 && dtype.bits == 32 && dtype.lanes == 1
}

/// An attrs' `out_dtype`: unset (void, "same as the inputs") or float32.
pub fn out_dtype_is_f32_or_unset(attrs: &Node) -> Result<bool> {
    Ok(match dtype_of(attrs.field("out_dtype")?)? {
        None => true,
        Some(dtype) => dtype.bits == 0 || is_f32(dtype),
    })
}

/// A dtype field's value: None, a data type, or an `ir.PrimType` holding one.
fn dtype_of(value: Any) -> Result<Option<DLDataType>> {
    if value.type_index() == TVMFFITypeIndex::kTVMFFINone as i32 {
        return Ok(None);
    }
    if let Some(node) = Node::from_any(value.clone()) {
        return dtype_of(node.field("dtype")?);
    }
    value.try_into().map(Some)
}

/// Calls the TVM global function `name`; a clear error when TVM's compiler is not loaded.
pub fn call_global(name: &str, args: &[AnyView]) -> Result<Any> {
    let function = Function::get_global(name).map_err(|_| {
        tvm_ffi::Error::new(
            tvm_ffi::RUNTIME_ERROR,
            &format!("TVM's compiler function {name} is not registered: `import tvm` first"),
            "",
        )
    })?;
    function.call_packed(args)
}

/// `R.prim_value(value)` for an int64 scalar argument.
pub fn int64(value: i64) -> Result<Any> {
    let dtype = DLDataType {
        code: DLDataTypeCode::kDLInt as u8,
        bits: 64,
        lanes: 1,
    };
    call_global(
        "ir.IntImm",
        &[AnyView::from(&dtype), AnyView::from(&value), AnyView::new()],
    )
}

/// `relax.TensorType` of `dtype`: with `shape` (dimension expressions), or of rank `ndim` only.
pub fn tensor_type(shape: Option<Vec<Any>>, ndim: i64, dtype: DLDataType) -> Result<Any> {
    let shape = match shape {
        Some(dims) => call_global(
            "relax.ShapeExpr",
            &[AnyView::from(&Array::new(dims)), AnyView::new()],
        )?,
        None => Any::default(),
    };
    let ndim = if shape.type_index() == TVMFFITypeIndex::kTVMFFINone as i32 {
        ndim
    } else {
        -1
    };
    call_global(
        "relax.TensorType",
        &[
            AnyView::from(&shape),
            AnyView::from(&dtype),
            AnyView::from(&ndim),
            AnyView::new(),
            AnyView::new(),
        ],
    )
}

/// `ir.TupleType` of `fields`.
pub fn tuple_type(fields: Vec<Any>) -> Result<Any> {
    call_global(
        "ir.TupleType",
        &[AnyView::from(&Array::new(fields)), AnyView::new()],
    )
}

/// The product of two integer expressions, folded when both are constants.
pub fn mul(a: &Any, b: &Any) -> Result<Any> {
    call_global(
        "prim._OpMul",
        &[AnyView::from(a), AnyView::from(b), AnyView::new()],
    )
}

/// `R.call_dps_packed(global_name, (args...), out_ty)`; `out_ty` a tensor type, or a tuple
/// type of them for a kernel with several outputs.
pub fn call_dps_packed(global_name: &str, args: Vec<Any>, out_ty: Any) -> Result<Any> {
    let name = tvm_ffi::String::from(global_name);
    let func = call_global(
        "relax.ExternFunc",
        &[AnyView::from(&name), AnyView::new(), AnyView::new()],
    )?;
    let fields = Array::new(args);
    let tuple = call_global("ir.Tuple", &[AnyView::from(&fields), AnyView::new()])?;
    let out_types = match Node::from_any(out_ty.clone()) {
        Some(ty) if ty.type_key() == "ir.TupleType" => ty.field("fields")?.try_into()?,
        _ => Array::new(vec![out_ty]),
    };
    call_global(
        "relax.op.call_dps_packed",
        &[
            AnyView::from(&func),
            AnyView::from(&tuple),
            AnyView::from(&out_types),
        ],
    )
}
