"""A kernel as Inductor writes them, for the Inductor tests (compiled here for sm_90, no GPU)."""

import triton
import triton.language as tl


@triton.jit
def triton_poi_fused_add_0(in_ptr0, out_ptr0, xnumel, XBLOCK: tl.constexpr):
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)
    xmask = xindex < xnumel
    tmp0 = tl.load(in_ptr0 + xindex, xmask)
    tl.store(out_ptr0 + xindex, tmp0 + 1.0, xmask)


# ---- what the tests need to build Inductor's objects on any supported torch without a GPU ----
def device_props():
    """DeviceProperties of an sm_90 GPU with the fields this torch's DeviceProperties has."""
    from torch._inductor.runtime.hints import DeviceProperties

    want = dict(type="cuda", index=0, multi_processor_count=132, cc=90, major=9, regs_per_multiprocessor=65536,
                max_threads_per_multi_processor=2048, max_threads_per_block=1024, warp_size=32)
    return DeviceProperties(**{k: v for k, v in want.items() if k in DeviceProperties._fields})


def compile_without_gpu():
    """Lets Inductor's own compile step (CachingAutotuner._precompile_config) run here: Triton
    compiles for the sm_90 target without a GPU, but Inductor first asks Triton for an active GPU
    driver, and its static launcher loads the cubin on the GPU. Both are switched off in this
    process; nothing else changes. Returns the config patch for the static launcher."""
    from torch._inductor import config
    from torch._inductor.runtime import triton_helpers

    triton_helpers.set_driver_to_gpu = lambda: None
    return {k: False for k in ("use_static_cuda_launcher", "use_static_triton_launcher") if hasattr(config, k)}


def kernel_source(name, xblocks=(1024,)):
    """A pointwise kernel's module as Inductor's wrapper codegen writes it (decorator, metadata,
    the @triton.jit body), for loading through Inductor's own PyCodeCache."""
    configs = ", ".join(f"triton.Config({{'XBLOCK': {b}}}, num_warps=4, num_stages=1)" for b in xblocks)
    return f'''
import triton
import triton.language as tl
from torch._inductor.runtime import triton_helpers, triton_heuristics
from torch._inductor.runtime.hints import AutotuneHint, DeviceProperties, HeuristicType
triton_helpers.set_driver_to_gpu()


@triton_heuristics.cached_autotune(
    {{'x': 4096}},
    [{configs}],
    triton_meta={{'signature': {{'in_ptr0': '*fp32', 'out_ptr0': '*fp32', 'xnumel': 'i32', 'XBLOCK': 'constexpr'}},
                 'device': {device_props()!r}, 'constants': {{}}, 'configs': [{{}}]}},
    inductor_meta={{'grid_type': 'Grid1D', 'kernel_name': {name!r}, 'mutated_arg_names': [], 'optimize_mem': True,
                   'no_x_dim': False, 'autotune_hints': set()}},
    heuristic_type=HeuristicType.POINTWISE,
    filename=__file__,
)
@triton.jit
def {name}(in_ptr0, out_ptr0, xnumel, XBLOCK: tl.constexpr):
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)
    xmask = xindex < xnumel
    tmp0 = tl.load(in_ptr0 + xindex, xmask)
    tl.store(out_ptr0 + xindex, tmp0 + 1.0, xmask)
'''


def load_in_worker(name, source):
    """The load_kernel a compile worker runs (Inductor passes _load_triton_kernel_from_source),
    with the GPU-less switches of compile_without_gpu() applied in the worker first."""
    from torch._inductor.codecache import _load_triton_kernel_from_source

    compile_without_gpu()
    return _load_triton_kernel_from_source(name, source)
