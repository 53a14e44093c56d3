"""Borrowed array views for the compiled event loop: no reference counting on the hot path.

Numba counts references to every array it passes between functions or reads from a
tuple, with an atomic increment and decrement each time. In an event loop that touches a
few dozen arrays per step these atomics cost far more than the simulation (measured: 80 %
of the run time). :func:`borrow` returns the same array without its owner pointer
(``meminfo`` = NULL, as for arrays made by ``numba.carray``), so nothing is counted at
run time.

The view also has its own type, :class:`BorrowedArray`, whose data model declares no
reference to count, so numba does not even emit the increments and decrements. For an
ordinary array it emits them (a null check each) at every copy of the engine's state
tuple, 28 arrays at a time: about half of the event loop's LLVM IR, and seconds of its
one-time compile. A borrowed array behaves as an ordinary array in every other way
(indexing, slicing, shape); a slice of one is an ordinary array again.

The view is only valid while the original array is alive: ``run_pool`` keeps the owning
arrays as its arguments for the whole call and never lets a borrowed view escape.
"""

from __future__ import annotations

from typing import Protocol, TypeVar, cast

import numpy as np
from numba import types
from numba.core import cgutils
from numba.core.datamodel.models import ArrayModel
from numba.extending import intrinsic, register_model


class BorrowedArray(types.Array):
    """The numba type of an array view that does not own a reference (see module docstring)."""

    def __init__(self, dtype, ndim, layout, readonly=False, aligned=True):  # type: ignore[no-untyped-def]
        super().__init__(dtype, ndim, layout, readonly=readonly, aligned=aligned,
                         name=f"borrowed array({dtype}, {ndim}d, {layout})")


@register_model(BorrowedArray)
class BorrowedArrayModel(ArrayModel):
    """An array's layout, with no reference for numba to count."""

    def traverse(self, builder):  # type: ignore[no-untyped-def]
        return []

    def has_nrt_meminfo(self) -> bool:
        return False


def _borrow(typingctx, arr):  # type: ignore[no-untyped-def]  # numba's typing and lowering API is untyped
    """The same array, not owning a reference (see module docstring)."""
    if not isinstance(arr, types.Array):
        return None
    view_type = BorrowedArray(arr.dtype, arr.ndim, arr.layout, readonly=not arr.mutable,  # type: ignore[no-untyped-call]
                              aligned=arr.aligned)

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        source = context.make_array(signature.args[0])(context, builder, value=args[0])
        view = context.make_array(signature.return_type)(context, builder)
        cgutils.copy_struct(view, source)  # type: ignore[no-untyped-call]
        view.meminfo = cgutils.get_null_value(view.meminfo.type)  # type: ignore[no-untyped-call]
        view.parent = cgutils.get_null_value(view.parent.type)  # type: ignore[no-untyped-call]
        return view._getvalue()

    return view_type(arr), codegen


_Array = TypeVar("_Array", bound=np.ndarray)


class _Borrow(Protocol):
    def __call__(self, arr: _Array, /) -> _Array: ...


borrow = cast(_Borrow, intrinsic(_borrow))
"""The same array, not owning a reference (see module docstring); callable from compiled code only."""
