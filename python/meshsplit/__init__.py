"""meshsplit from Python: meshes, JAX-style PartitionSpec / NamedSharding and
DTensor-style placements over the compiler's own sharding algebra.

The C++ extension ``meshsplit._meshsplit`` binds the public C++ API
(include/meshsplit/meshsplit.h); this file only gives its values Python
spellings (``Mesh({"data": 2})``, ``P("data", None)``, ``Shard(0)``).
Errors raise :class:`Error`, whose text is the CLI's diagnostic.
"""

from dataclasses import dataclass

from . import _meshsplit as _ms

Error = _ms.Error
ConversionError = _ms.ConversionError

__all__ = [
    "Error", "ConversionError", "Mesh", "PartitionSpec", "P", "NamedSharding",
    "Shard", "Replicate", "Partial", "from_placements", "visualize_sharding",
]


class Mesh(_ms._Mesh):
    """A named N-d array of devices.

    ``Mesh({"data": 2, "model": 4})``, ``Mesh((2, 4), ("data", "model"))`` or
    ``Mesh("data=2,model=4")``; ``devices`` optionally gives the device ids
    row major over the axes (default 0..N-1).
    """

    def __init__(self, axes, names=None, devices=None):
        if isinstance(axes, str):
            if names is not None:
                raise TypeError("Mesh(text) takes no axis names")
            parsed = _ms._Mesh.parse(axes)
            pairs, order = parsed.axes, list(parsed.device_ids)
        elif isinstance(axes, dict):
            if names is not None:
                raise TypeError("Mesh(dict) takes no separate axis names")
            pairs, order = list(axes.items()), None
        else:
            shape = tuple(axes)
            if names is None or len(tuple(names)) != len(shape):
                raise TypeError("Mesh(shape, names) needs one name per mesh dim")
            pairs, order = list(zip(names, shape)), None
        if devices is not None:
            order = [int(d) for d in _flatten(devices)]
        super().__init__([(str(n), int(s)) for n, s in pairs], order or [])

    @property
    def shape(self):
        """Axis name -> size, in mesh order (as jax.sharding.Mesh.shape)."""
        return dict(self.axes)

    @property
    def devices(self):
        """The device ids as a NumPy array shaped like the mesh."""
        import numpy as np
        return np.array(self.device_ids, dtype=np.int64).reshape([s for _, s in self.axes])

    def __repr__(self):
        return f"Mesh({self.shape!r})" if list(self.device_ids) == list(range(self.size)) \
            else f"Mesh({self.shape!r}, devices={list(self.device_ids)!r})"


def _flatten(x):
    if hasattr(x, "tolist"):
        x = x.tolist()
    if isinstance(x, (list, tuple)):
        for e in x:
            yield from _flatten(e)
    else:
        yield x


class PartitionSpec(tuple):
    """Per tensor dim: None (not split), a mesh axis name, or a tuple of axis
    names (major first). Missing trailing dims are not split."""

    def __new__(cls, *dims):
        for d in dims:
            ok = d is None or isinstance(d, str) or (
                isinstance(d, tuple) and all(isinstance(a, str) for a in d))
            if not ok:
                raise TypeError(f"PartitionSpec entries are None, a str or a tuple of str, not {d!r}")
        return super().__new__(cls, dims)

    def __repr__(self):
        return "P(" + ", ".join(repr(d) for d in self) + ")"

    def _axes(self):
        """The per-dim axis lists the C++ API takes."""
        return [[] if d is None else [d] if isinstance(d, str) else list(d) for d in self]

    @staticmethod
    def _from_axes(dims):
        return PartitionSpec(*[None if not a else a[0] if len(a) == 1 else tuple(a) for a in dims])


P = PartitionSpec


@dataclass(frozen=True)
class Shard:
    """DTensor placement: tensor dim ``dim`` is split over this mesh axis."""
    dim: int

    def _core(self):
        return _ms._Placement(_ms._Placement.Kind.SHARD, self.dim)


@dataclass(frozen=True)
class Replicate:
    """DTensor placement: every device on this mesh axis holds the same data."""

    def _core(self):
        return _ms._Placement(_ms._Placement.Kind.REPLICATE)


@dataclass(frozen=True)
class Partial:
    """DTensor placement: devices on this mesh axis hold partial values that
    combine with ``reduce_op`` (only "sum" has an HLO form)."""
    reduce_op: str = "sum"

    def _core(self):
        return _ms._Placement(_ms._Placement.Kind.PARTIAL, 0, self.reduce_op)


def _placement_from_core(p):
    if p.kind == _ms._Placement.Kind.SHARD:
        return Shard(p.dim)
    if p.kind == _ms._Placement.Kind.PARTIAL:
        return Partial(p.reduce_op)
    return Replicate()


class NamedSharding:
    """A mesh and a PartitionSpec (JAX's NamedSharding); ``partial`` names mesh
    axes over which the value holds partial sums (DTensor's Partial)."""

    def __init__(self, mesh, spec, partial=()):
        if not isinstance(spec, PartitionSpec):
            spec = PartitionSpec(*spec)
        self.mesh = mesh
        self.spec = spec
        self._core = _ms._NamedSharding(mesh, spec._axes(), [str(a) for a in partial])

    @property
    def partial(self):
        return tuple(self._core.partial)

    def hlo_sharding(self, ndim=None):
        """The HLO sharding text on a tensor of rank ``ndim`` (default: the
        spec's length), the same text a --shard rule with these dims gives."""
        return self._core.hlo_sharding(len(self.spec) if ndim is None else ndim)

    def to_placements(self):
        """One DTensor placement per mesh axis; ConversionError when a dim is
        split over several axes in non-mesh order."""
        return tuple(_placement_from_core(p) for p in self._core.to_placements())

    def __eq__(self, other):
        return isinstance(other, NamedSharding) and self._core == other._core

    def __hash__(self):
        return hash((str(self.mesh), tuple(tuple(a) for a in self._norm()), self.partial))

    def _norm(self):
        dims = list(self._core.dims)
        while dims and not dims[-1]:
            dims.pop()
        return dims

    def __repr__(self):
        extra = f", partial={self.partial!r}" if self.partial else ""
        return f"NamedSharding({self.mesh!r}, {self.spec!r}{extra})"


def _wrap_sharding(mesh, core):
    s = NamedSharding.__new__(NamedSharding)
    s.mesh = mesh
    s.spec = PartitionSpec._from_axes(core.dims)
    s._core = core
    return s


def from_placements(mesh, placements, ndim):
    """The NamedSharding of a rank-``ndim`` tensor placed on ``mesh`` with one
    DTensor placement per mesh axis."""
    core = _ms._from_placements(mesh, [p._core() for p in placements], int(ndim))
    return _wrap_sharding(mesh, core)


def visualize_sharding(shape, sharding):
    """A text grid of the devices holding each tile of a rank-1 or rank-2
    tensor of ``shape`` (as jax.debug.visualize_array_sharding)."""
    return _ms._visualize_sharding([int(n) for n in shape], sharding._core)
