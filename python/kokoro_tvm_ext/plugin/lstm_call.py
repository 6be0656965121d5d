"""The plugin's LSTM op, ``kokoro_tvm_ext.lstm``: its name, and the arguments of one call as Relax expressions,
what the frontend builds from a torch node and what the op's legalizations read back (both in the kernel's
argument order). ``legalize/switch.py`` registers the op under this name."""

from __future__ import annotations

from dataclasses import dataclass

from tvm import relax

from kokoro_tvm_ext.plugin import kernels

#: The plugin's LSTM op, also the LSTM kernel's global name. Defined here, with the reading of its calls, so that
#: the op's registration (legalize/switch.py) and its TIR legalization (legalize/lstm_tir.py) import it in one way.
LSTM_OP_NAME = "kokoro_tvm_ext.lstm"


@dataclass
class LSTMCall:
    """The arguments of one LSTM, already converted to Relax expressions."""

    x: relax.Expr
    lengths: relax.Expr | None
    h0: relax.Expr | None
    c0: relax.Expr | None
    weights: list
    num_layers: int
    bidirectional: bool
    batch_first: bool
    has_biases: bool

    @property
    def directions(self) -> int:
        return 2 if self.bidirectional else 1

    @property
    def hidden(self) -> int:
        return int(self.weights[1].ty.shape[1])

    def op_arguments(self) -> list[relax.Expr]:
        """The arguments of the ``kokoro_tvm_ext.lstm`` op (and kernel) for this LSTM."""
        # torch's flat weights: w_ih, w_hh[, b_ih, b_hh] per layer and direction, forward first.
        names = ("w_ih", "w_hh", "b_ih", "b_hh")[: 4 if self.has_biases else 2]
        weights = [dict(zip(names, self.weights[i : i + len(names)])) for i in range(0, len(self.weights), len(names))]
        return kernels.arguments(
            "lstm",
            num_layers=self.num_layers,
            bidirectional=int(self.bidirectional),
            batch_first=int(self.batch_first),
            has_biases=int(self.has_biases),
            has_lengths=int(self.lengths is not None),
            has_state=int(self.h0 is not None),
            x=self.x,
            lengths=self.lengths,
            h0=self.h0,
            c0=self.c0,
            weights=weights,
        )

    @classmethod
    def from_op(cls, call: relax.Call) -> LSTMCall:
        """The LSTM a ``kokoro_tvm_ext.lstm`` call computes."""
        args = kernels.read_arguments("lstm", list(call.args))
        if args is None:
            raise ValueError(f"{LSTM_OP_NAME}: its arguments do not fit the kernel's interface: {call}")
        weights = [w for entry in args["weights"] for w in entry.values()]
        return cls(
            args["x"],
            args.get("lengths"),
            args.get("h0"),
            args.get("c0"),
            weights,
            args["num_layers"],
            bool(args["bidirectional"]),
            bool(args["batch_first"]),
            bool(args["has_biases"]),
        )
