"""Quantization sites found from the model itself: no list of module names per family.

The rule (docs/methods.md section 10):

1. **Blocks**: the ``nn.ModuleList`` of ``num_hidden_layers`` blocks, as
   :func:`isoscope.engine.arch.blocks_of` finds it for every view.
2. **Projections**: every ``nn.Linear`` (and GPT-2's ``transformers.pytorch_utils.Conv1D``) of a
   layer: inside its block, or the i-th member of a list kept beside the blocks (XLM's
   ``attentions[i]`` / ``ffns[i]``), named by its full module name in the loaded model (as
   SmoothQuant's ``act_scales`` keys them, e.g. ``model.layers.3.self_attn.q_proj`` for a causal
   LM, ``layers.3.self_attn.q_proj`` for the bare ``LlamaModel`` isoscope loads). Linears inside a
   ``ModuleList`` of two or more same-class modules of which one pass runs several, some on fewer
   rows than the layer's tokens, are routed MoE experts: skipped, with a note (stacked blocks that
   every token runs are sites). Named in notes and not sites: a module that returns a tuple (a
   router's weights and chosen experts), 1-D convolutions of kernel one (channels first), and
   projections the pass calls outside the layers.
3. **Sites**: one traced forward pass (:func:`isoscope.engine.arch.projection_inputs`, the same
   pass and rule as the norms' :func:`~isoscope.engine.arch.wiring`) records the input tensor of
   every projection; projections whose input is the very same tensor (object identity: q/k/v,
   gate/up, Falcon's parallel attention + MLP) form one site.
4. **Roles**, from the execution order within each block. A site is *norm-fed* when its input is
   the output of a norm module (arch's rule: the norm's output shares its storage, else holds its
   rows; ``Norm.feeds`` says the same the other way round). The first norm-fed site is
   ``attn_in``; non-norm-fed sites before the second norm-fed one are ``attn_out``; the second
   norm-fed site is ``mlp_in``; non-norm-fed sites after it are ``mlp_out``. This covers pre-norm
   (Llama, GPT-2), post-norm (BERT: the previous block's output LayerNorm feeds q/k/v) and
   sandwich norms (Gemma 2/3). A block with no norm-fed site falls back to the call order
   (attn_in, attn_out, mlp_in, mlp_out, ...), with a note; a parallel block (one norm feeding
   attention and MLP) has one ``attn_in`` site that lists the MLP's input projections too, and
   the sites first used after that shared input comes back (the MLP's input projection runs after
   the attention's output projection) are ``mlp_out``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import cast

import torch

from isoscope.engine.arch import blocks_of, projection_inputs
from isoscope.engine.errors import UnsupportedModelError

ROLES = ("attn_in", "attn_out", "mlp_in", "mlp_out")
ROLE_LABELS = {
    "attn_in": "attention input",
    "attn_out": "attention output proj.",
    "mlp_in": "MLP input",
    "mlp_out": "MLP output proj.",
    "other": "other",
}


def _conv1d_class():
    try:
        from transformers.pytorch_utils import Conv1D
    except ImportError:  # pragma: no cover - transformers always has it
        return None
    return Conv1D


def is_projection(module: torch.nn.Module) -> bool:
    conv = _conv1d_class()
    return isinstance(module, torch.nn.Linear) or (conv is not None and isinstance(module, conv))


def weight_matrix(module: torch.nn.Module) -> torch.Tensor:
    """The weight as (out, in), whatever the class (Conv1D keeps it as (in, out))."""
    w = cast(torch.Tensor, module.weight)
    return w if isinstance(module, torch.nn.Linear) else w.T


@dataclass(frozen=True)
class Site:
    """One input tensor of one block, feeding ``modules`` (full names, in call order)."""

    layer: int
    role: str
    modules: tuple[str, ...]  # public names, as SmoothQuant's act_scales key them
    paths: tuple[str, ...]  # the same modules' names inside the analysed root module
    width: int
    norm_fed: bool
    # the public name of the norm whose output is this input (None when no norm feeds it): the
    # module SmoothQuant folds its scales into
    norm: str | None = None
    # False for a projection the model never calls, using its weight alone (Mamba's dt_proj:
    # ``dt_proj.weight @ dt``): a site of its own, with no traced input
    traced: bool = True

    @property
    def name(self) -> str:
        return self.modules[0]


@dataclass(frozen=True)
class SiteMap:
    sites: tuple[Site, ...]
    blocks_path: str
    num_layers: int
    notes: tuple[str, ...] = field(default_factory=tuple)

    def modules(self, root: torch.nn.Module) -> dict[str, torch.nn.Module]:
        """``{path: module}`` of every projection of every site."""
        named = dict(root.named_modules())
        return {path: named[path] for site in self.sites for path in site.paths}


def name_prefix(loaded) -> str:
    """``model.`` when the checkpoint is a head model (``LlamaForCausalLM``) but isoscope loaded its
    base (``LlamaModel``), so names match the checkpoint's and SmoothQuant's act_scales keys."""
    model = loaded.model
    base = loaded.encoder
    if base is not model:
        for name, module in model.named_modules():
            if module is base:
                return f"{name}." if name else ""
    prefix = getattr(model, "base_model_prefix", "") or ""
    archs = list(getattr(loaded.config, "architectures", None) or [])
    if archs:  # the checkpoint says which class it was saved from
        head_model = archs[0] != type(model).__name__
    else:  # not recorded (e.g. a GGUF file): decoders ship as *ForCausalLM
        head_model = bool(loaded.info.is_causal)
    return f"{prefix}." if prefix and head_model else ""


def find_blocks(root: torch.nn.Module, num_layers: int) -> tuple[str, torch.nn.ModuleList]:
    """The repeated block list of ``root`` (its path inside ``root``): arch's one rule
    (:func:`isoscope.engine.arch.blocks_of`, the blocks its traced pass sees), checked to hold
    ``num_layers`` blocks with linear projections."""
    found = blocks_of(root)
    if found is None or len(found[1]) != num_layers or num_layers < 1:
        raise UnsupportedModelError(
            f"found no list of {num_layers} repeated blocks in this model (its layers may share "
            "one module); the quantization analysis needs one block module per layer"
        )
    if not any(is_projection(m) for m in found[1][0].modules()):
        convs = [
            n
            for n, m in found[1][0].named_modules()
            if isinstance(m, torch.nn.Conv1d) and int(m.kernel_size[0]) == 1
        ]
        if convs:
            raise UnsupportedModelError(
                f"the blocks' projections are 1-D convolutions of kernel one on a channels-first "
                f"(batch, features, tokens) input (e.g. {convs[0]}); the quantization analysis "
                "reads nn.Linear / Conv1D projections, one row per token"
            )
        raise UnsupportedModelError(
            "the blocks of this model have no nn.Linear or Conv1D projections to quantize"
        )
    return found


def _expert_lists(block: torch.nn.Module) -> list[str]:
    """The ``ModuleList`` s of a block that may hold routed experts: two or more same-class
    modules with projections (:func:`_routed` decides from the traced pass)."""
    return [
        name
        for name, m in block.named_modules()
        if isinstance(m, torch.nn.ModuleList)
        and len(m) >= 2
        and len({type(c) for c in m}) == 1
        and any(is_projection(c) for c in m[0].modules())
    ]


def _routed(lists: dict[str, set[int]], calls: list[tuple[int, str, int]]) -> set[str]:
    """The candidate lists (path -> the blocks holding it) that hold routed experts: those of
    which one block's pass runs two or more members, some of them on fewer rows than the block's
    projections see (each expert gets its routed tokens). A list of which each pass runs one
    member is a per-layer choice (Zamba2's adapters of its shared block, one per use), and a list
    whose members all see every token is stacked feed-forward blocks (MobileBERT's ``ffn``):
    every projection of both is a site. ``calls``: (block, projection path, rows of its input)
    of the traced pass."""
    members: dict[tuple[str, int], set[str]] = {}
    full: dict[int, int] = {}  # block -> the most rows a projection of it saw (its tokens)
    for layer, _, rows in calls:
        full[layer] = max(full.get(layer, 0), rows)
    subset: set[str] = set()
    for layer, path, rows in calls:
        for lst in lists:
            if path.startswith(lst + "."):
                member = path[len(lst) + 1 :].split(".")[0]
                members.setdefault((lst, layer), set()).add(member)
                if rows < full[layer]:
                    subset.add(lst)
    return {
        lst
        for lst in lists
        if lst in subset and any(len(m) >= 2 for (x, _), m in members.items() if x == lst)
    }


def _after_reentry(sequence: list[tuple[int, int]], groups: dict) -> set[tuple[int, int]]:
    """The inputs first used after the block's first norm-fed input came back once another input
    had been used: a parallel block (Falcon, Phi, Cohere: one norm feeding attention and MLP) runs
    its MLP's input projection on that input after the attention's output projection, so the sites
    after that point belong to the MLP."""
    first_fed = next((k for k in sequence if groups[k][2]), None)
    seen: set[tuple[int, int]] = set()
    after: set[tuple[int, int]] = set()
    prev, reentered = None, False
    for key in sequence:
        if key == first_fed and key in seen and prev != key:
            reentered = True
        if key not in seen:
            seen.add(key)
            if reentered:
                after.add(key)
        prev = key
    return after


def public_names(loaded, root: torch.nn.Module | None = None, public: str | None = None):
    """Maps a module path of the traced model to its public name (the one the sites' ``modules``
    use, as the checkpoint and llm-compressor name them): its path inside ``root`` (default
    ``loaded.encoder``) behind ``public`` (default :func:`name_prefix`), else the traced path."""
    root = loaded.encoder if root is None else root
    public = name_prefix(loaded) if public is None else public
    traced = dict(loaded.model.named_modules())
    in_root = {m: n for n, m in root.named_modules()}

    def name(path: str) -> str:
        module = traced.get(path)
        return public + in_root[module] if module in in_root else path

    return name


def layer_parts(
    root: torch.nn.Module, blocks_path: str, blocks
) -> list[list[tuple[str, torch.nn.Module]]]:
    """Per layer, ``(path prefix, module)`` of its parts inside ``root``: the block, and the i-th
    member of every list kept beside the blocks (XLM, Flaubert: ``attentions[i]``, ``ffns[i]``)."""
    from isoscope.engine.arch.tracing import sibling_lists

    names = {m: n for n, m in root.named_modules()}
    prefix = f"{blocks_path}." if blocks_path else ""
    parts = [[(f"{prefix}{i}.", block)] for i, block in enumerate(blocks)]
    for lst in sibling_lists(root, blocks):
        for i, member in enumerate(lst):
            parts[i].append((f"{names[lst]}.{i}.", member))
    return parts


def _block_projections(
    loaded, parts: list[list[tuple[str, torch.nn.Module]]]
) -> tuple[dict[torch.nn.Module, tuple[int, str]], int]:
    """Every projection of the layers' parts -> (layer index, path), and how many routed-expert
    projections were left out."""
    lists: dict[str, set[int]] = {}
    for i, layer in enumerate(parts):
        for prefix, part in layer:
            for e in _expert_lists(part):
                lists.setdefault(f"{prefix}{e}", set()).add(i)
    inside = {
        m: (i, prefix + sub if sub else prefix[:-1])
        for i, layer in enumerate(parts)
        for prefix, part in layer
        for sub, m in part.named_modules()
    }
    routed: set[str] = set()
    if lists:
        named = dict(loaded.model.named_modules())
        calls = [
            (c.layer, inside[named[c.path]][1], c.rows)
            for c in projection_inputs(loaded)
            if named.get(c.path) in inside
        ]
        routed = _routed(lists, calls)
    projections: dict[torch.nn.Module, tuple[int, str]] = {}
    skipped = 0
    for module, (i, path) in inside.items():
        if not is_projection(module):
            continue
        if any(path.startswith(e + ".") for e in routed):
            skipped += 1
            continue
        projections[module] = (i, path)
    return projections, skipped


def _exclusions(loaded, root: torch.nn.Module, projections: dict) -> list[str]:
    """Notes naming the projection-like modules the forward calls that are not sites: a module
    with a 2-D weight that returns a tuple (a router returning weights and chosen experts), a
    1-D convolution of kernel one (a per-token projection laid out channels first), and
    projections outside the layers (model-level ones such as Gemma 3n's AltUp projections)."""
    named = dict(loaded.model.named_modules())
    in_root = {m: n for n, m in root.named_modules()}
    called = {named[c.path]: c for c in projection_inputs(loaded) if c.path in named}
    tuples = [in_root[m] for m, c in called.items() if m in projections and not c.plain]
    for m in [m for m, c in called.items() if m in projections and not c.plain]:
        projections.pop(m)
    notes = []
    if tuples:
        notes.append(
            f"{len(tuples)} module(s) with a weight matrix return a tuple rather than one output "
            f"per token (a router's weights and chosen experts, e.g. {tuples[0]}): not sites"
        )
    convs = [
        n
        for n, m in root.named_modules()
        if isinstance(m, torch.nn.Conv1d) and int(m.kernel_size[0]) == 1 and m.groups == 1
    ]
    if convs:
        notes.append(
            f"{len(convs)} 1-D convolution(s) of kernel one act as per-token projections on a "
            f"channels-first (batch, features, tokens) input (e.g. {convs[0]}): not sites here, "
            "as the scan reads one row per token"
        )
    from isoscope.engine.arch.tracing import projections_outside

    outside = [in_root.get(named[p], p) for p in projections_outside(loaded) if p in named]
    if outside:
        notes.append(
            f"{len(outside)} projection(s) run outside the layers (e.g. {outside[0]}): not sites, "
            "which are per layer"
        )
    return notes


def _input_groups(loaded, projections: dict) -> tuple[dict[tuple[int, int], list], dict]:
    """The traced projection inputs grouped per (layer, shared input tensor) -> [names, width,
    norm], in call order, and per layer the sequence of those keys as the block calls them."""
    named = dict(loaded.model.named_modules())  # the paths of the traced model
    groups: dict[tuple[int, int], list] = {}
    sequence: dict[int, list[tuple[int, int]]] = {}
    for call in projection_inputs(loaded):
        module = named.get(call.path)
        if module not in projections:  # outside the blocks, not a Linear/Conv1D, or an expert
            continue
        layer, name = projections[module]
        key = (layer, call.shared)
        sequence.setdefault(layer, []).append(key)
        if key not in groups:
            groups[key] = [[], call.width, call.norm]
        if name not in groups[key][0]:
            groups[key][0].append(name)
    if not groups:
        raise UnsupportedModelError("no projection inside the blocks ran in a forward pass")
    return groups, sequence


def _role(k: int, fed: list[bool], n_fed: int, after_reentry: bool) -> str:
    """The role of a block's ``k``-th input: by the norm outputs it reads (the first fed input is
    the attention's, the second the MLP's), else by call order."""
    if not any(fed):
        return ROLES[k] if k < len(ROLES) else "other"
    if fed[k]:
        return {1: "attn_in", 2: "mlp_in"}.get(n_fed, "other")
    if n_fed == 1 and after_reentry:
        return "mlp_out"  # a parallel block's MLP, after its shared input came back
    return {0: "attn_in", 1: "attn_out"}.get(n_fed, "mlp_out")


def _new_mixers(loaded) -> dict[int, list[set[torch.nn.Module]]]:
    """Per block (0-based) whose token mixers are not plain softmax attention (state-space,
    recurrent, linear attention, convolution, latent attention, parallel or shared mixers, or no
    mixer at all), the modules of each mixer, from the layer pattern
    (:func:`isoscope.engine.arch.layer_pattern`). Plain attention blocks are not listed: their
    roles follow the norms (:func:`_role`)."""
    from isoscope.engine.arch import layer_pattern
    from isoscope.engine.arch.mixers import FULL, SLIDING

    try:
        pattern = layer_pattern(loaded)
    except UnsupportedModelError:
        return {}
    named = dict(loaded.model.named_modules())
    out: dict[int, list[set[torch.nn.Module]]] = {}
    for kinds in pattern.layers:
        plain = (
            len(kinds.mixers) == 1
            and kinds.mixers[0].kind in (FULL, SLIDING)
            and not kinds.mixers[0].shared
        )
        if plain:
            continue
        out[kinds.layer - 1] = [
            set(named[m.path].modules()) for m in kinds.mixers if m.path in named
        ]
    return out


def _mixer_roles(
    modules: list[list[torch.nn.Module]], fed: list[bool], mixers: list[set[torch.nn.Module]]
) -> list[str]:
    """Roles of a block's inputs (call order; ``modules``: the projections of each, ``fed``: a
    residual-width norm's output) from its mixers: a mixer's first input is ``attn_in`` (the
    token mixer's input, whatever its kind), its last ``attn_out``, those between ``other`` (a
    mixer's internal projections: Mamba's x_proj, latent attention's q_b / kv_b). Outside the
    mixers a norm-fed input is ``mlp_in``, and an input after it ``mlp_out``."""
    owner = [next((j for j, mixer in enumerate(mixers) if ms[0] in mixer), None) for ms in modules]
    roles = []
    seen_mlp_in = False
    for k, j in enumerate(owner):
        if j is not None:
            mine = [i for i, o in enumerate(owner) if o == j]
            roles.append("attn_in" if k == mine[0] else "attn_out" if k == mine[-1] else "other")
        elif fed[k]:
            roles.append("mlp_in")
            seen_mlp_in = True
        else:
            roles.append("mlp_out" if seen_mlp_in else "other")
    return roles


def _fused_experts(blocks: Iterable[torch.nn.Module], prefix: str) -> list[str]:
    """The modules of the blocks holding 3-D weights other than convolutions: every expert's
    projection in one tensor (transformers' fused MoE experts)."""
    return [
        f"{prefix}{i}.{name}"
        for i, block in enumerate(blocks)
        for name, module in block.named_modules()
        if not isinstance(module, torch.nn.modules.conv._ConvNd)  # a conv's (out, in, k) weight
        and any(p.ndim == 3 for p in module.parameters(recurse=False))
    ]


def _residual_norms(loaded) -> set[str]:
    """The norms of the residual width (the traced paths): the ones whose outputs define a
    block's roles. A norm inside a mixer (Mamba-2's and Gated DeltaNet's gated norm before
    out_proj, latent attention's q_a / kv_a norms) feeds a projection too, but its site stays in
    the mixer's part of the block."""
    from isoscope.engine.arch import wiring

    try:
        norms = wiring(loaded).norms
    except UnsupportedModelError:
        return set()
    width = int(loaded.info.hidden_size)
    return {n.path for n in norms if n.width == width}


def _untraced_sites(projections: dict, groups: dict, public: str) -> list[Site]:
    """A site per projection of the blocks that the traced pass never called, except copies
    whose weight is that of a called one (Zamba2's shared block, one copy per use, tied)."""
    called = {path for names, _, _ in groups.values() for path in names}
    weights = {
        m.weight.untyped_storage().data_ptr()
        for m, (_, path) in projections.items()
        if path in called
    }
    sites = []
    for module, (layer, path) in projections.items():
        if path in called or module.weight.untyped_storage().data_ptr() in weights:
            continue
        width = int(weight_matrix(module).shape[1])
        sites.append(Site(layer, "other", (public + path,), (path,), width, False, None, False))
    return sites


def discover_sites(loaded, root: torch.nn.Module | None = None) -> SiteMap:
    """The sites of ``root`` (default ``loaded.encoder``), from the traced forward pass of
    :func:`isoscope.engine.arch.projection_inputs` (the one home of which tensor and which norm
    feed which projection; the same trace gives :func:`isoscope.engine.arch.wiring`)."""
    root = root if root is not None else loaded.encoder
    num_layers = int(loaded.info.num_layers)
    blocks_path, blocks = find_blocks(root, num_layers)
    projections, skipped = _block_projections(loaded, layer_parts(root, blocks_path, blocks))
    notes: list[str] = _exclusions(loaded, root, projections)
    if skipped:
        notes.append(
            f"{skipped} projections of routed MoE experts were skipped (each expert sees only its "
            "routed tokens; analyse them with an expert-aware tool)"
        )
    fused = _fused_experts(blocks, f"{blocks_path}." if blocks_path else "")
    if fused:
        notes.append(
            f"{len(fused)} routed-expert module(s) keep each projection of all their experts in "
            f"one 3-D tensor (e.g. {fused[0]}): each expert sees only its routed tokens, so they "
            "are not sites here (their router and any shared expert are)"
        )
    groups, sequence = _input_groups(loaded, projections)
    parallel_mlp = {k for layer in sequence for k in _after_reentry(sequence[layer], groups)}
    public = name_prefix(loaded) if root is loaded.encoder else ""
    norm_name = public_names(loaded, root, public)
    sites: list[Site] = []
    fallback_layers = []
    residual = _residual_norms(loaded)
    by_module = {path: m for m, (_, path) in projections.items()}
    mixers = _new_mixers(loaded)
    for layer in sorted({key[0] for key in groups}):
        keys = [k for k in groups if k[0] == layer]  # call order
        fed = [groups[k][2] in residual for k in keys]
        inside = mixers.get(layer)
        if inside is not None:
            roles = _mixer_roles([[by_module[n] for n in groups[k][0]] for k in keys], fed, inside)
        elif not any(fed):
            fallback_layers.append(layer)
        for k, key in enumerate(keys):
            names, width, norm = groups[key]
            if inside is not None:
                role = roles[k]
            else:
                role = _role(k, fed, sum(fed[: k + 1]), key in parallel_mlp)
            sites.append(
                Site(
                    layer,
                    role,
                    tuple(public + n for n in names),
                    tuple(names),
                    int(width),
                    norm is not None,
                    None if norm is None else norm_name(norm),
                )
            )
    sites += _untraced_sites(projections, groups, public)
    sites.sort(key=lambda site: site.layer)  # stable: call order within a block
    untraced = [s.name for s in sites if not s.traced]
    if untraced:
        notes.append(
            f"{len(untraced)} projection(s) are never called as modules (the mixer multiplies by "
            f"their weight itself, e.g. {untraced[0]}): each is a site of its own, with no traced "
            "input and so no activation statistics"
        )
    if fallback_layers:
        notes.append(
            f"no norm output feeds a projection in block(s) {fallback_layers}; roles there follow "
            "the call order (attention input, output, MLP input, output)"
        )
    return SiteMap(tuple(sites), blocks_path, num_layers, tuple(notes))
