"""Our kernels' interfaces, read from the Rust library, and relax calls built by parameter name.

Each kernel's parameters are described once, in ``tvm-ext/src/interface.rs``; the Rust parsers check every
read against that table and the global function ``kokoro_tvm_ext.kernel_interfaces()`` returns it as JSON::

    {"conv1d": {"global": "kokoro_tvm_ext.conv1d", "dps": true, "returns": null,
                "params": [{"name": "stride", "kind": "int"}, ..., {"name": "has_bias", "kind": "flag"},
                           {"name": "x", "kind": "tensor"}, {"name": "w", "kind": "tensor"},
                           {"name": "bias", "kind": "tensor", "when": "has_bias"},
                           {"name": "out", "kind": "output"}]},
     ...}

- ``kind``: ``int``, ``flag`` (an int, 0 or 1), ``float``, ``string``: scalars, always first and always
  passed; ``tensor``: an input; ``output``: a destination of a destination-passing (``"dps": true``) kernel,
  which relax allocates (``out_ty``), so it is never an argument of the ``call_dps_packed``;
  ``group``: a repeated group, see below. Plain functions (``"dps": false``) name what they return.
- ``when`` (optional): the parameter is passed only if the flag of that name is 1 (``"has_bias"``) or the int
  has that value (``"act==1"``).
- A group ``{"name": "weights", "kind": "group", "repeat": {"axes": [...], "params": [...]}}`` passes its
  ``params`` once per combination of its ``axes``, the last axis varying fastest. An axis
  ``{"index": "direction", "count": "bidirectional", "plus": 1, "labels": ["forward", "reverse"]}`` has
  ``value(count) + plus`` entries. Here a group's value is a list of dicts, one per combination, e.g. the
  LSTM's ``weights=[{"w_ih": ..., "w_hh": ..., "b_ih": ..., "b_hh": ...}, ...]`` (layer 0 forward,
  layer 0 reverse, layer 1 forward, ...), with the optional members present as their ``when`` says.

``call("conv1d", out_ty, stride=1, ..., has_bias=0, x=x, w=w)`` builds a call; ``KernelCall.read(expr)``
reads one back by name (``kc["stride"]``, ``kc["w"]``), and ``kc.replace(has_bias=1, bias=b)`` or
``kc.to("conv1d_bf16", w=packed, kernel_size=3)`` rewrites it. Importing this module needs TVM's compiler
(``tvm.relax``) but not torch.
"""

from __future__ import annotations

import functools
import itertools
import json
from dataclasses import dataclass
from typing import Any

import tvm_ffi
from tvm import relax, tirx

from kokoro_tvm_ext import _native  # noqa: F401  (loads the library that registers the function)

PREFIX = "kokoro_tvm_ext."
SCALAR_KINDS = ("int", "flag", "float", "string")
_CALL_DPS_PACKED = "relax.call_dps_packed"


@dataclass(frozen=True)
class Param:
    name: str
    kind: str
    when: str | None = None

    def present(self, values: dict[str, Any]) -> bool:
        """Whether this parameter is passed, given the scalars' values."""
        if self.when is None:
            return True
        if "==" in self.when:
            name, value = self.when.split("==")
            return int(values[name]) == int(value)
        return int(values[self.when]) == 1


@dataclass(frozen=True)
class Axis:
    index: str
    count: str
    plus: int
    labels: tuple[str, ...]

    def size(self, values: dict[str, Any]) -> int:
        return int(values[self.count]) + self.plus


@dataclass(frozen=True)
class Group:
    name: str
    axes: tuple[Axis, ...]
    params: tuple[Param, ...]
    kind: str = "group"

    def times(self, values: dict[str, Any]) -> int:
        n = 1
        for axis in self.axes:
            n *= max(axis.size(values), 0)
        return n


Entry = Param | Group


@dataclass(frozen=True)
class Interface:
    name: str
    global_name: str
    dps: bool
    returns: str | None
    params: tuple[Entry, ...]

    @property
    def scalars(self) -> tuple[Param, ...]:
        return tuple(p for p in self.params if isinstance(p, Param) and p.kind in SCALAR_KINDS)

    @property
    def names(self) -> tuple[str, ...]:
        """Every parameter and group name, in call order."""
        return tuple(p.name for p in self.params)

    def arguments(self, values: dict[str, Any]) -> list[tuple[str, str]]:
        """``(label, kind)`` of every argument a packed call with these scalar values passes, outputs
        included, in order; a group member's label carries its index, e.g. ``w_ih[layer 0, forward]``
        (the name the kernels' messages use)."""
        out = []
        for p in self.params:
            if isinstance(p, Param):
                if p.present(values):
                    out.append((p.name, p.kind))
                continue
            for index in itertools.product(*(range(max(a.size(values), 0)) for a in p.axes)):
                at = ", ".join(a.labels[i] if i < len(a.labels) else f"{a.index} {i}" for a, i in zip(p.axes, index))
                out += [(f"{q.name}[{at}]", q.kind) for q in p.params if q.present(values)]
        return out

    def argument_count(self, values: dict[str, Any]) -> int:
        """How many arguments a packed call with these scalar values passes (outputs included)."""
        return len(self.arguments(values))


def _param(d: dict) -> Param:
    return Param(d["name"], d["kind"], d.get("when"))


def _entry(d: dict) -> Entry:
    if d["kind"] != "group":
        return _param(d)
    rep = d["repeat"]
    axes = tuple(Axis(a["index"], a["count"], int(a["plus"]), tuple(a["labels"])) for a in rep["axes"])
    return Group(d["name"], axes, tuple(_param(p) for p in rep["params"]))


def parse(text: str) -> dict[str, Interface]:
    """The interfaces in ``kokoro_tvm_ext.kernel_interfaces()``'s JSON."""
    return {
        name: Interface(name, d["global"], bool(d["dps"]), d["returns"], tuple(_entry(p) for p in d["params"]))
        for name, d in json.loads(text).items()
    }


@functools.cache
def interfaces() -> dict[str, Interface]:
    """Every registered function's interface, by short name (read once from the Rust library)."""

    return parse(str(tvm_ffi.get_global_func(PREFIX + "kernel_interfaces")()))


def interface(name: str) -> Interface:
    """The interface of kernel ``name`` (short, like ``"conv1d"``, or global)."""
    short = name[len(PREFIX) :] if name.startswith(PREFIX) else name
    found = interfaces().get(short)
    if found is None:
        raise KeyError(f"no kernel named {name!r}; known: {', '.join(interfaces())}")
    return found


def _prim(p: Param, value: Any) -> relax.Expr:
    if isinstance(value, relax.Expr):
        return value
    if p.kind == "float":
        return relax.prim_value(float(value))
    if p.kind == "flag" and int(value) not in (0, 1):
        raise ValueError(f"{p.name}: expected 0 or 1, got {value!r}")
    if p.kind == "string":
        raise TypeError(f"{p.name}: string arguments are not built into relax calls")
    return relax.prim_value(int(value))


def _scalar_value(p: Param, expr: relax.Expr) -> Any:
    value = expr.value
    if p.kind == "float":
        return float(value)
    return int(value)


def call(kernel: str, out_ty, **args: Any) -> relax.Call:
    """``call_dps_packed`` of destination-passing ``kernel`` with its arguments by name.

    Scalars are python numbers (or relax prim values), tensors relax expressions, groups lists of dicts
    (see the module docs). Optional tensors must be given exactly when their condition holds.
    """
    iface = interface(kernel)
    if not iface.dps:
        raise ValueError(f"{iface.name}: not a destination-passing kernel (it returns {iface.returns})")
    return relax.op.call_dps_packed(iface.global_name, relax.Tuple(arguments(kernel, **args)), out_ty=out_ty)


def arguments(kernel: str, **args: Any) -> list[relax.Expr]:
    """The argument list of a call of ``kernel`` (outputs excluded), from its arguments by name as :func:`call`
    takes them."""
    iface = interface(kernel)
    known = [p.name for p in iface.params if p.kind != "output"]
    unknown = sorted(set(args) - set(known))
    if unknown:
        raise TypeError(f"{iface.name}: unknown argument(s) {', '.join(unknown)}; parameters: {', '.join(known)}")
    values = {}
    fields: list[relax.Expr] = []
    for p in iface.scalars:
        if p.name not in args:
            raise TypeError(f"{iface.name}: missing argument {p.name}")
        fields.append(_prim(p, args[p.name]))
        values[p.name] = _scalar_value(p, fields[-1]) if isinstance(args[p.name], relax.Expr) else args[p.name]
    for entry in iface.params:
        if isinstance(entry, Group):
            fields += _group_fields(iface, entry, args.get(entry.name), values)
        elif entry.kind == "tensor":
            fields += _tensor_fields(iface, entry, args, values)
    return fields


def _tensor_fields(iface: Interface, p: Param, args: dict, values: dict) -> list:
    given = args.get(p.name) is not None
    condition = p.when if p.when is None or "==" in p.when else f"{p.when}==1"
    if p.present(values) and not given:
        raise TypeError(f"{iface.name}: missing argument {p.name}" + (f" (passed when {condition})" if p.when else ""))
    if not p.present(values) and given:
        raise TypeError(f"{iface.name}: {p.name} is passed only when {condition}")
    return [args[p.name]] if given else []


def _group_fields(iface: Interface, g: Group, items, values: dict) -> list:
    want = g.times(values)
    if items is None or len(items) != want:
        got = "none" if items is None else len(items)
        raise TypeError(f"{iface.name}: {g.name}: expected {want} entries, got {got}")
    fields = []
    for item in items:
        unknown = sorted(set(item) - {p.name for p in g.params})
        if unknown:
            raise TypeError(f"{iface.name}: {g.name}: unknown member(s) {', '.join(unknown)}")
        for p in g.params:
            fields += _tensor_fields(iface, p, item, values)
    return fields


def read_arguments(kernel: str, fields: list) -> dict[str, Any] | None:
    """The arguments by name (as :func:`call` takes them) in ``fields``, the argument list of a call of
    ``kernel`` (outputs excluded), or ``None`` if they do not fit its interface."""
    iface = interface(kernel)
    scalars = iface.scalars
    if len(fields) < len(scalars) or not all(
        isinstance(f, (tirx.IntImm, tirx.FloatImm)) for f in fields[: len(scalars)]
    ):
        return None
    args: dict[str, Any] = {p.name: _scalar_value(p, f) for p, f in zip(scalars, fields)}
    values = dict(args)
    tensors = [p for p in iface.params if isinstance(p, Group) or p.kind == "tensor"]
    outputs = sum(1 for p in iface.params if getattr(p, "kind", None) == "output")
    if len(fields) != iface.argument_count(values) - outputs:
        return None
    rest = iter(fields[len(scalars) :])
    for entry in tensors:
        if isinstance(entry, Group):
            args[entry.name] = [
                {p.name: next(rest) for p in entry.params if p.present(values)} for _ in range(entry.times(values))
            ]
        elif entry.present(values):
            args[entry.name] = next(rest)
    return args


class KernelCall:
    """A ``call_dps_packed`` to one of our kernels, its arguments by name."""

    def __init__(self, expr: relax.Call, iface: Interface, args: dict[str, Any]):
        self.expr = expr
        self.interface = iface
        self.args = args

    @property
    def name(self) -> str:
        """The kernel's short name, e.g. ``"conv1d"``."""
        return self.interface.name

    @classmethod
    def read(cls, expr) -> KernelCall | None:
        """``expr`` read by parameter name, or ``None`` if it is not a well-formed call of one of our kernels."""
        if not isinstance(expr, relax.Call) or getattr(expr.op, "name", None) != _CALL_DPS_PACKED:
            return None
        callee, fields = expr.args[0], expr.args[1]
        if not isinstance(callee, relax.ExternFunc) or not isinstance(fields, relax.Tuple):
            return None
        symbol = str(callee.global_symbol)
        if not symbol.startswith(PREFIX) or symbol[len(PREFIX) :] not in interfaces():
            return None
        iface = interface(symbol)
        if not iface.dps:
            return None
        args = read_arguments(iface.name, list(fields.fields))
        return None if args is None else cls(expr, iface, args)

    def __getitem__(self, name: str) -> Any:
        """The argument ``name``; ``None`` for an optional tensor absent from this call."""
        if name in self.args:
            return self.args[name]
        if name in self.interface.names:
            return None
        raise KeyError(f"{self.name} has no parameter {name!r}; parameters: {', '.join(self.interface.names)}")

    def __contains__(self, name: str) -> bool:
        return name in self.args

    @property
    def out_ty(self):
        """The call's output type as ``call_dps_packed`` takes it: a list for several outputs."""
        ty = self.expr.ty_args[0]
        return list(ty.fields) if isinstance(ty, relax.TupleType) else ty

    def replace(self, **changes: Any) -> relax.Call:
        """The same call with some arguments changed, e.g. ``replace(has_bias=1, bias=b)``."""
        return self.to(self.name, **changes)

    def to(self, kernel: str, **changes: Any) -> relax.Call:
        """A call of ``kernel`` (e.g. ``"conv1d_bf16"``) with this call's arguments and ``changes``."""
        merged = {**self.args, **changes}
        return call(kernel, self.out_ty, **{k: v for k, v in merged.items() if v is not None})

    def __repr__(self) -> str:
        return f"KernelCall({self.name}, {self.args!r})"


__all__ = [
    "Axis",
    "Group",
    "Interface",
    "KernelCall",
    "Param",
    "arguments",
    "call",
    "interface",
    "interfaces",
    "parse",
    "read_arguments",
]
