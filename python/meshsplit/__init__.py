"""meshsplit from Python: load an HLO or ONNX program, shard it over a mesh
with JAX-style PartitionSpecs (or DTensor-style placements), partition it
into one SPMD program, run it on N virtual devices, verify it. docs/python.md.

The C++ extension ``meshsplit._meshsplit`` binds the public C++ API
(include/meshsplit/meshsplit.h), which runs the CLI's own pipeline; this file
only gives its values Python spellings (``Mesh({"data": 2})``,
``P("data", None)``, ``Shard(0)``, NumPy arrays). Errors raise
:class:`Error`, whose text is the CLI's diagnostic.
"""

from dataclasses import dataclass

from . import _meshsplit as _ms

__version__ = _ms.__version__
Error = _ms.Error
ConversionError = _ms.ConversionError

__all__ = [
    "Error", "ConversionError", "Mesh", "PartitionSpec", "P", "NamedSharding",
    "Shard", "Replicate", "Partial", "from_placements", "visualize_sharding",
    "Module", "load", "parse", "ShardSpec", "REPLICATED", "partition", "run", "verify", "report", "autoshard", "Plan",
    "PartitionResult", "VerifyReport",
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


# --- modules, specs and the pipeline -------------------------------------------

Module = _ms.Module
PartitionResult = _ms.PartitionResult
VerifyReport = _ms.VerifyReport


def load(path):
    """Loads HLO text, or ONNX by the ``.onnx`` extension (the CLI's load path)."""
    return _ms.load(str(path))


def parse(text, name="<string>"):
    """Parses HLO text; ``name`` stands for the file in diagnostics."""
    return _ms.parse(text, name)


REPLICATED = "replicated"


class ShardSpec:
    """A --shard spec: a mesh and rules ``{glob: P(...) or "replicated"}``
    applied to the entry parameters and constants by name; the first
    matching glob wins (dict order)."""

    def __init__(self, mesh, rules=None, existing_axes=()):
        self.mesh = mesh
        self.rules = dict(rules or {})
        self.existing_axes = tuple(existing_axes)
        core_rules = []
        for match, dims in self.rules.items():
            if isinstance(dims, str) and dims == REPLICATED:
                core_rules.append((str(match), True, []))
            else:
                spec = dims if isinstance(dims, PartitionSpec) else PartitionSpec(*dims)
                core_rules.append((str(match), False, spec._axes()))
        self._core = _ms._ShardSpec(mesh, core_rules, [str(a) for a in self.existing_axes])

    @staticmethod
    def _wrap(core):
        axes = core.mesh.axes
        mesh = Mesh(dict(axes), devices=list(core.mesh.device_ids))
        rules = {m: REPLICATED if rep else PartitionSpec._from_axes(d) for m, rep, d in core.rules}
        return ShardSpec(mesh, rules, core.existing_axes)

    @staticmethod
    def from_json(text, name="<spec>"):
        """From spec-file JSON (docs/shard_spec.md)."""
        return ShardSpec._wrap(_ms._ShardSpec.from_json(text, name))

    @staticmethod
    def load(path):
        """Reads a spec file."""
        return ShardSpec._wrap(_ms._ShardSpec.load(str(path)))

    def to_json(self):
        """The spec-file JSON (what --shard reads)."""
        return self._core.to_json()

    def __repr__(self):
        return f"ShardSpec({self.mesh!r}, {self.rules!r})"


# NumPy dtype <-> HLO element type. bf16 travels as uint16 words (NumPy has
# no bf16), as in the CLI's .npy files.
_HLO_OF_NUMPY = {
    "bool": "pred", "int8": "s8", "int16": "s16", "int32": "s32", "int64": "s64",
    "uint8": "u8", "uint16": "u16", "uint32": "u32", "uint64": "u64",
    "float16": "f16", "float32": "f32", "float64": "f64",
    "complex64": "c64", "complex128": "c128",
}
_NUMPY_OF_HLO = {v: k for k, v in _HLO_OF_NUMPY.items()}
_NUMPY_OF_HLO["bf16"] = "uint16"


def _options(num_partitions, propagate, strict):
    return _ms._Options(int(num_partitions), bool(propagate), bool(strict))


def _core_spec(spec):
    if spec is None:
        return None
    if not isinstance(spec, ShardSpec):
        raise TypeError(f"spec must be a meshsplit.ShardSpec, not {type(spec).__name__}")
    return spec._core


def partition(module, spec=None, *, num_partitions=0, propagate=True, strict=False):
    """Applies ``spec``, propagates and partitions: ``p.text`` is the SPMD
    program (as ``meshsplit partition`` prints it), ``p.collectives`` counts
    the collectives by opcode."""
    return _ms._partition(module, _core_spec(spec), _options(num_partitions, propagate, strict))


def _to_host(param, value):
    import numpy as np
    name, shape, dtype = param
    a = np.asarray(value)
    if not a.flags.c_contiguous:
        a = np.ascontiguousarray(a)  # (which would make a scalar 1-d)
    hlo = _HLO_OF_NUMPY.get(a.dtype.name)
    if hlo is None:
        raise Error(f"error: input '{name}': NumPy dtype {a.dtype} has no HLO element type")
    if not a.dtype.isnative:
        a = a.astype(a.dtype.newbyteorder("="))
    return _ms._HostArray(hlo, list(a.shape), a.tobytes())


def _to_numpy(h):
    import numpy as np
    return np.frombuffer(h.data, dtype=_NUMPY_OF_HLO[h.dtype]).reshape(h.shape).copy()


def run(module, inputs=(), spec=None, *, num_partitions=0, propagate=True):
    """Runs the program with full-shape NumPy inputs, by parameter name (a
    dict) or in parameter order (a list); on the N virtual devices of the
    partitioned program when ``spec`` (or ``num_partitions``) gives more than
    one, else on one device. Returns the outputs as a list of NumPy arrays."""
    params = module.parameters
    if isinstance(inputs, dict):
        known = {p[0] for p in params}
        extra = sorted(set(inputs) - known)
        if extra:
            raise Error(f"error: input '{extra[0]}' names no entry parameter of {module.source_name}")
        missing = [p[0] for p in params if p[0] not in inputs]
        if missing:
            raise Error(f"error: no input for parameter '{missing[0]}'")
        values = [inputs[p[0]] for p in params]
    else:
        values = list(inputs)
        if len(values) != len(params):
            raise Error(f"error: {len(values)} inputs for {len(params)} entry parameters")
    host = [_to_host(p, v) for p, v in zip(params, values)]
    outs = _ms._run(module, host, _core_spec(spec), _options(num_partitions, propagate, False))
    return [_to_numpy(h) for h in outs]


def verify(module, spec=None, seed=0, *, num_partitions=0, propagate=True, strict=False):
    """``meshsplit verify``: the partitioned program on N devices against the
    original on one, seeded random inputs. ``r.ok``, ``r.max_abs_error``,
    ``r.first_diverging`` (the first instruction whose value differs)."""
    return _ms._verify(module, _core_spec(spec), int(seed),
                       _options(num_partitions, propagate, strict))


def report(module, spec=None, *, num_partitions=0, propagate=True):
    """``meshsplit report --json`` as a dict: per-device and unpartitioned
    FLOPs, bytes and peak memory, every collective with its cause
    (docs/report.md)."""
    import json
    return json.loads(_ms._report(module, _core_spec(spec), _options(num_partitions, propagate, False)))


class Plan:
    """An automatic sharding plan: ``spec`` (a ShardSpec for partition, run,
    verify, report), ``cost`` (estimated seconds per step), ``evaluations``."""

    def __init__(self, core):
        self.spec = ShardSpec._wrap(core.spec)
        self.cost = core.cost
        self.evaluations = core.evaluations

    def __repr__(self):
        return f"Plan(cost={self.cost:.4g} s, {self.evaluations} candidates, {self.spec!r})"


def autoshard(module, mesh, budget=300, *, time_limit=50, seed=0, memory_limit=0,
              existing_axes=()):
    """``meshsplit autoshard --mesh``: searches mesh_split decisions for the
    module's inputs and weights (docs/autoshard.md). ``time_limit=0`` bounds
    the search by ``budget`` alone, so the plan depends on nothing else;
    ``memory_limit`` caps the peak bytes per device (0: none)."""
    return Plan(_ms._autoshard(module, mesh, int(budget), float(time_limit), int(seed),
                               int(memory_limit), [str(a) for a in existing_axes]))
