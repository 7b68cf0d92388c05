# SPDX-License-Identifier: Apache-2.0
"""Arrays as users have them (NumPy arrays of any dtype, torch tensors, lists, OGB's (N, 1)
labels, boolean masks) turned into what the C++ module reads: C-contiguous int64 ids and labels
and float32 values. A conversion happens only when it is exact (every value comes out the same);
otherwise a ValueError names the argument and the problem. The caller's objects are never
modified: an array that already has the right dtype and layout is passed by reference, anything
else is copied."""
import numpy as np


def _type_name(value):
    return type(value).__module__ + "." + type(value).__qualname__


def as_numpy(value, name):
    """A NumPy view (or copy) of a NumPy array, torch tensor, scipy array-like or sequence."""
    if isinstance(value, np.ndarray):
        return value
    module = type(value).__module__ or ""
    if module.startswith("torch"):
        if getattr(value, "is_cuda", False) or str(getattr(value, "device", "cpu")) != "cpu":
            raise ValueError(f"{name}: the tensor is on {value.device}; pass a CPU tensor "
                             f"(this build reads host memory)")
        value = value.detach()
        if str(value.dtype) == "torch.bfloat16":
            value = value.float()  # NumPy has no bfloat16; every bf16 value is an exact float32
        return value.numpy()
    if isinstance(value, (str, bytes, dict)) or value is None:
        raise ValueError(f"{name}: expected an array (NumPy, torch or a sequence), got "
                         f"{_type_name(value)}")
    try:
        array = np.asarray(value)
    except Exception as error:  # a ragged list, an object NumPy cannot read
        raise ValueError(f"{name}: cannot read {_type_name(value)} as an array ({error})") from None
    if array.dtype == object:
        raise ValueError(f"{name}: cannot read {_type_name(value)} as an array of numbers")
    return array


def _integral(array, name, kind):
    """array as int64, exactly, or ValueError."""
    if array.dtype == np.int64:
        return array
    if array.dtype == np.bool_:
        raise ValueError(f"{name}: expected integer {kind}, got a boolean array")
    if np.issubdtype(array.dtype, np.unsignedinteger):
        if array.size and int(array.max()) > np.iinfo(np.int64).max:
            raise ValueError(f"{name}: the value {array.max()} does not fit int64")
        return array.astype(np.int64)
    if np.issubdtype(array.dtype, np.integer):
        return array.astype(np.int64)
    if np.issubdtype(array.dtype, np.floating):
        finite = np.isfinite(array)
        if not finite.all():
            raise ValueError(f"{name}: {array.dtype} {kind} contain NaN or infinity")
        whole = array.astype(np.int64)
        if not np.array_equal(whole, array):
            at = int(np.flatnonzero(whole.ravel() != array.ravel())[0])
            raise ValueError(f"{name}: expected integer {kind}, got {array.dtype} with the "
                             f"non-integral value {array.ravel()[at]} at position {at}")
        return whole
    raise ValueError(f"{name}: expected integer {kind}, got dtype {array.dtype}")


def _contiguous(array):
    return array if array.flags.c_contiguous else np.ascontiguousarray(array)


def ids(value, name, num_nodes=None):
    """A 1-D int64 index array, or, from a boolean mask of num_nodes entries, its true positions."""
    array = as_numpy(value, name)
    if array.dtype == np.bool_:
        if array.ndim != 1:
            raise ValueError(f"{name}: expected a 1-D mask, got shape {array.shape}")
        if num_nodes is not None and array.shape[0] != num_nodes:
            raise ValueError(f"{name}: a mask needs num_nodes = {num_nodes} entries, got "
                             f"{array.shape[0]}")
        return np.flatnonzero(array).astype(np.int64)
    if array.ndim != 1:
        raise ValueError(f"{name}: expected a 1-D index array or boolean mask, got shape "
                         f"{array.shape}")
    return _contiguous(_integral(array, name, "node ids"))


def edge_index(value, name="edge_index"):
    array = as_numpy(value, name)
    if array.ndim != 2 or array.shape[0] != 2:
        raise ValueError(f"{name}: expected shape (2, E), got {tuple(array.shape)}")
    return _contiguous(_integral(array, name, "node ids"))


def labels(value, name="y"):
    """1-D int64 labels; OGB's (N, 1) column is taken as (N)."""
    array = as_numpy(value, name)
    if array.ndim == 2 and array.shape[1] == 1:
        array = array.reshape(-1)
    if array.ndim != 1:
        raise ValueError(f"{name}: expected labels of shape (N) or (N, 1), got {array.shape}")
    return _contiguous(_integral(array, name, "labels"))


def values(value, name, ndim=2):
    """float32 values (features, targets), converted only where every value is exact."""
    array = as_numpy(value, name)
    if array.ndim != ndim:
        raise ValueError(f"{name}: expected a {ndim}-D array, got {array.ndim}-D")
    if array.dtype == np.float32:
        return _contiguous(array)
    if array.dtype == np.bool_ or not (np.issubdtype(array.dtype, np.floating) or
                                       np.issubdtype(array.dtype, np.integer)):
        raise ValueError(f"{name}: expected floating-point values, got dtype {array.dtype}")
    converted = array.astype(np.float32)
    same = (converted == array) | (np.isnan(converted) & np.isnan(array)
                                   if np.issubdtype(array.dtype, np.floating) else False)
    if not np.all(same):
        at = int(np.flatnonzero(~np.asarray(same).ravel())[0])
        raise ValueError(f"{name}: {array.dtype} value {array.ravel()[at]!r} at flat position "
                         f"{at} has no exact float32 (convert it yourself, e.g. x.float() or "
                         f"x.astype(numpy.float32), to accept the rounding)")
    return _contiguous(converted)
