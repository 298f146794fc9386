"""Every accelerator the engine knows, behind one small API.

Supported: NVIDIA/AMD GPUs (``torch.cuda``), Ascend NPUs (``torch_npu`` → ``torch.npu``), Biren SUPA
(``torch_supa`` → ``torch.supa``, fused operators from ``torch_supa_ext``), Intel XPUs (``torch.xpu``), Apple
MPS (``torch.mps``) and the CPU. When several are importable the preference order is XPU, NPU, SUPA, MPS,
CUDA, then CPU.

Platform packages are imported lazily, only when availability is asked, and a broken install reads as
"not available" (with a debug log) rather than an error: importing this module never imports
``torch_npu`` or ``torch_supa`` and sets nothing globally. Answers are cached; :func:`clear_cache` forgets
them (tests use it).
"""

from __future__ import annotations

import functools
import gc
import importlib
import importlib.util
import logging
import multiprocessing
import os
import platform
import sys
import time
from dataclasses import dataclass
from importlib import metadata
from typing import Any

import torch

from engine.attention_choice import choose_attention
from engine.errors import ModelError

logger = logging.getLogger(__name__)

PREFERENCE_ORDER = ("xpu", "npu", "supa", "mps", "cuda")
"""Accelerator types in the order they are preferred when several are present."""

BACKEND_LABELS = {"cuda": "CUDA", "npu": "NPU", "supa": "SUPA", "xpu": "XPU", "mps": "MPS", "cpu": "CPU"}

RAY_NOSET_VISIBLE_DEVICES_VARS = (
    "RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES",
    "RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES",
    "RAY_EXPERIMENTAL_NOSET_SUPA_VISIBLE_DEVICES",
    "RAY_EXPERIMENTAL_NOSET_ROCR_VISIBLE_DEVICES",
    "RAY_EXPERIMENTAL_NOSET_HIP_VISIBLE_DEVICES",
    "RAY_EXPERIMENTAL_NOSET_ONEAPI_DEVICE_SELECTOR",
)
"""Variables that tell Ray to leave each accelerator's ``*_VISIBLE_DEVICES`` alone."""

REPORTED_PACKAGES = (
    "transformers", "peft", "trl", "accelerate", "datasets", "tokenizers", "safetensors", "gradio",
    "deepspeed", "bitsandbytes", "liger-kernel", "flash-attn", "vllm", "torch-npu", "torch-supa",
)


@dataclass(frozen=True)
class Accelerator:
    """The accelerator this process uses.

    Attributes:
        type: ``"cuda"``, ``"npu"``, ``"supa"``, ``"xpu"``, ``"mps"`` or ``"cpu"``.
        module: The torch namespace that drives it (``torch.cuda``, ``torch.npu``, ...); None for the CPU.
        count: How many devices of that type are visible (0 for the CPU).
    """

    type: str
    module: Any | None
    count: int

    @property
    def is_accelerator(self) -> bool:
        """True for anything but the CPU."""
        return self.type != "cpu"

    @property
    def label(self) -> str:
        """Short backend name for reports: ``CUDA``, ``ROCm``, ``NPU``, ``SUPA``, ``XPU``, ``MPS`` or ``CPU``."""
        if self.type == "cuda" and getattr(torch.version, "hip", None):
            return "ROCm"
        return BACKEND_LABELS.get(self.type, self.type.upper())


# ---------------------------------------------------------------------------------------------------------
# Availability (lazy, cached)


def _try_import(name: str) -> Any | None:
    """Import a platform package; any failure (missing, or a broken toolkit) reads as None."""
    try:
        return importlib.import_module(name)
    except ImportError:
        return None
    except Exception as err:  # a vendor package whose native toolkit is missing can raise anything
        logger.debug("Importing %s failed: %s", name, err)
        return None


def _namespace_available(name: str) -> bool:
    namespace = getattr(torch, name, None)
    if namespace is None or not hasattr(namespace, "is_available"):
        return False
    try:
        return bool(namespace.is_available())
    except Exception as err:
        logger.debug("torch.%s.is_available() failed: %s", name, err)
        return False


@functools.cache
def is_xpu_available() -> bool:
    """True when an Intel XPU is usable through ``torch.xpu``."""
    return _namespace_available("xpu")


@functools.cache
def is_npu_available() -> bool:
    """True when ``torch_npu`` imports and ``torch.npu.is_available()``."""
    if _try_import("torch_npu") is None:
        return False
    return _namespace_available("npu")


@functools.cache
def is_supa_available() -> bool:
    """True when ``torch_supa`` imports and ``torch.supa.is_available()``."""
    if _try_import("torch_supa") is None:
        return False
    return _namespace_available("supa")


@functools.cache
def is_mps_available() -> bool:
    """True on Apple silicon with a working MPS backend."""
    backend = getattr(torch.backends, "mps", None)
    try:
        return bool(backend is not None and backend.is_available())
    except Exception:
        return False


@functools.cache
def is_cuda_available() -> bool:
    """True when a CUDA (or ROCm) GPU is visible."""
    return _namespace_available("cuda")


_AVAILABILITY = {
    "xpu": is_xpu_available,
    "npu": is_npu_available,
    "supa": is_supa_available,
    "mps": is_mps_available,
    "cuda": is_cuda_available,
}


@functools.cache
def load_supa_extension() -> bool:
    """Import ``torch_supa_ext`` (fused ``torch.ops.sudnn`` operators), which SUPA does not load by itself.

    Returns:
        True when the extension is loaded. When it is missing a warning says so; the eager path still works.
    """
    if _try_import("torch_supa_ext") is not None:
        return True
    logger.warning(
        "Biren SUPA is present but `torch_supa_ext` is not installed: the fused operators (RMSNorm) are off and "
        "the eager path is much slower. Install Biren's torch_supa_ext package that matches your torch_supa."
    )
    return False


@functools.cache
def get_accelerator() -> Accelerator:
    """The preferred accelerator of this machine (XPU, NPU, SUPA, MPS, CUDA, then CPU)."""
    for kind in PREFERENCE_ORDER:
        if not _AVAILABILITY[kind]():
            continue
        module = getattr(torch, kind)
        try:
            count = int(module.device_count()) if hasattr(module, "device_count") else 1
        except Exception:
            count = 1
        if kind == "supa":
            load_supa_extension()
        return Accelerator(type=kind, module=module, count=max(count, 1))
    return Accelerator(type="cpu", module=None, count=0)


def clear_cache() -> None:
    """Forget every cached availability answer (after changing the environment, and in tests)."""
    for fn in (*_AVAILABILITY.values(), load_supa_extension, get_accelerator):
        fn.cache_clear()


# ---------------------------------------------------------------------------------------------------------
# Devices, dtypes and memory


def local_rank() -> int:
    """This process's index on its machine (``LOCAL_RANK``; 0 when not distributed)."""
    try:
        return int(os.environ.get("LOCAL_RANK", "0"))
    except ValueError:
        return 0


def device_string() -> str:
    """The device of this process as text: ``cpu``, ``mps`` or ``<type>:<LOCAL_RANK>`` (e.g. ``supa:1``)."""
    acc = get_accelerator()
    if acc.type in ("cpu", "mps"):
        return acc.type
    return f"{acc.type}:{local_rank()}"


def current_device() -> torch.device:
    """The torch device of this process (the accelerator indexed by ``LOCAL_RANK``, or the CPU)."""
    return torch.device(device_string())


def device_count() -> int:
    """Number of accelerator devices visible (0 on a CPU-only machine)."""
    return get_accelerator().count


def device_name(index: int = 0) -> str:
    """The marketing name of an accelerator (``platform.processor()`` or "CPU" on the CPU)."""
    acc = get_accelerator()
    if acc.type == "cpu":
        return platform.processor() or platform.machine() or "CPU"
    if acc.type == "mps":
        return "Apple MPS"
    try:
        return str(acc.module.get_device_name(index))
    except Exception:
        return acc.label


def is_bf16_supported() -> bool:
    """Whether the current device computes in bfloat16 (the CPU does)."""
    acc = get_accelerator()
    if acc.type == "cpu":
        return True
    if acc.type == "mps":
        checker = getattr(torch.backends.mps, "is_macos_or_newer", None)
        return bool(checker(14, 0)) if checker else False
    fn = getattr(acc.module, "is_bf16_supported", None)
    try:
        return bool(fn()) if fn else False
    except Exception:
        return False


def is_fp16_supported() -> bool:
    """Whether float16 is a sensible compute type here (every accelerator; not the CPU)."""
    return get_accelerator().is_accelerator


_DTYPE_NAMES = {
    "float32": torch.float32, "fp32": torch.float32, "float": torch.float32,
    "float16": torch.float16, "fp16": torch.float16, "half": torch.float16,
    "bfloat16": torch.bfloat16, "bf16": torch.bfloat16,
}


def choose_dtype(requested: str | torch.dtype = "auto", for_training: bool = False) -> torch.dtype:
    """The dtype to load a model in.

    Args:
        requested: ``"auto"``, ``"float32"``, ``"float16"``, ``"bfloat16"`` (or ``fp32``/``fp16``/``bf16``),
            ``"pure_bf16"`` (weights kept in bfloat16 while training), or a ``torch.dtype``.
        for_training: Whether the model will be trained (only changes the wording of errors; trainable
            parameters are upcast to float32 by the loader unless ``pure_bf16``).

    Returns:
        ``auto``: bfloat16 where supported, else float16 on accelerators; float32 on the CPU.

    Raises:
        ValueError: For an unknown name, or a half type the device cannot run.
    """
    acc = get_accelerator()
    where = f"this {acc.label} device" if acc.is_accelerator else "the CPU"
    purpose = "training" if for_training else "inference"
    if isinstance(requested, torch.dtype):
        dtype = requested
    else:
        name = str(requested or "auto").strip().lower()
        if name == "auto":
            if not acc.is_accelerator:
                return torch.float32
            return torch.bfloat16 if is_bf16_supported() else torch.float16
        if name == "pure_bf16":
            if not is_bf16_supported():
                raise ModelError(
                    f"`pure_bf16` needs bfloat16, which {where} does not support; use `fp16: true` "
                    "(mixed precision) or train in float32 instead."
                )
            return torch.bfloat16
        if name not in _DTYPE_NAMES:
            raise ModelError(f"Unknown dtype `{requested}`; use auto, float32, float16 or bfloat16.")
        dtype = _DTYPE_NAMES[name]
    if dtype == torch.bfloat16 and not is_bf16_supported():
        raise ModelError(f"bfloat16 {purpose} is not supported on {where}; use float16 (fp16) or float32.")
    if dtype == torch.float16 and not is_fp16_supported():
        raise ModelError(f"float16 {purpose} is not supported on {where}; use bfloat16 (bf16) or float32.")
    return dtype


def memory_info(index: int = 0) -> tuple[int, int]:
    """(free, total) bytes of an accelerator's memory, or of the machine's RAM on the CPU."""
    acc = get_accelerator()
    if acc.type == "mps":
        total = int(torch.mps.recommended_max_memory())
        return max(total - int(torch.mps.driver_allocated_memory()), 0), total
    if acc.is_accelerator:
        mem_get_info = getattr(acc.module, "mem_get_info", None)
        if mem_get_info is not None:
            free, total = mem_get_info(index)
            return int(free), int(total)
        total = int(acc.module.get_device_properties(index).total_memory)
        return total - int(acc.module.memory_reserved(index)), total
    import psutil

    vm = psutil.virtual_memory()
    return int(vm.available), int(vm.total)


def peak_memory() -> int:
    """Peak memory in bytes: the accelerator's max allocated, or this process's peak resident size on CPU."""
    acc = get_accelerator()
    if acc.type == "mps":
        return int(torch.mps.driver_allocated_memory())
    if acc.is_accelerator:
        return int(acc.module.max_memory_allocated())
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)  # bytes on macOS, KiB on Linux


def peak_reserved_memory() -> int:
    """Peak memory the accelerator's caching allocator reserved (the CPU's peak resident size otherwise)."""
    acc = get_accelerator()
    fn = getattr(acc.module, "max_memory_reserved", None) if acc.is_accelerator else None
    return int(fn()) if fn else peak_memory()


def empty_cache() -> None:
    """Run the garbage collector and release the accelerator's cached memory."""
    gc.collect()
    acc = get_accelerator()
    if acc.is_accelerator and hasattr(acc.module, "empty_cache"):
        acc.module.empty_cache()


def synchronize() -> None:
    """Wait for the accelerator's queued work to finish (nothing to wait for on the CPU)."""
    acc = get_accelerator()
    if acc.is_accelerator and hasattr(acc.module, "synchronize"):
        acc.module.synchronize()


class CpuEvent:
    """A timing event for the CPU with the ``Event`` interface of torch's accelerators."""

    def __init__(self, enable_timing: bool = True):
        self.enable_timing = enable_timing
        self._time: float | None = None

    def record(self, stream: Any = None) -> None:
        self._time = time.perf_counter()

    def synchronize(self) -> None:
        return None

    def query(self) -> bool:
        return self._time is not None

    def elapsed_time(self, end: CpuEvent) -> float:
        """Milliseconds from this event to ``end``."""
        if self._time is None or end._time is None:
            raise RuntimeError("Both events must be recorded before elapsed_time().")
        return (end._time - self._time) * 1000.0


def make_event(enable_timing: bool = True) -> Any:
    """A timing event of the current accelerator (``torch.<type>.Event``), or a :class:`CpuEvent`."""
    acc = get_accelerator()
    event_cls = getattr(acc.module, "Event", None) if acc.is_accelerator else None
    if event_cls is None:
        return CpuEvent(enable_timing=enable_timing)
    return event_cls(enable_timing=enable_timing)


# ---------------------------------------------------------------------------------------------------------
# Kernels and processes


def attention_is_auto(requested: str | None) -> bool:
    """Whether a config's attention choice is left to this engine (``auto`` or unset)."""
    from engine.attention_choice import ATTENTION_ALIASES

    return ATTENTION_ALIASES.get(str(requested or "auto").strip().lower()) == "auto"


def pick_attention(requested: str | None = "auto") -> str:
    """The attention implementation to load a model with.

    ``auto`` becomes ``sdpa`` (torch's fused attention, safe on every device; on SUPA it is pinned, since no
    FlashAttention build exists there). FlashAttention is honoured only where it can run
    (:func:`engine.attention_choice.choose_attention` on this process's accelerator).

    Raises:
        ModelError: Unknown name, or FlashAttention requested where the package or the device is missing.
    """
    acc = get_accelerator()
    return choose_attention(requested, acc.type, acc.label)


def check_kernel_booster(name: str) -> bool:
    """Whether a kernel booster can be applied here.

    Args:
        name: ``"liger"`` (Liger fused kernels) or ``"unsloth"``.

    Returns:
        True when it should be applied; False when the device cannot run it (logged as a note).

    Raises:
        ValueError: For Unsloth (not supported), an unknown name, or Liger requested but not installed.
    """
    key = name.strip().lower().replace("-", "_")
    acc = get_accelerator()
    if key == "unsloth":
        if acc.type == "supa":
            raise ModelError("Unsloth cannot run on Biren SUPA; remove `use_unsloth` (the fused SUPA operators "
                             "are used automatically).")
        raise ModelError("Unsloth is not supported by this engine; remove `use_unsloth` (LoRA with sdpa attention "
                         "is used instead).")
    if key not in ("liger", "liger_kernel"):
        raise ModelError(f"Unknown kernel booster `{name}`; expected `liger` or `unsloth`.")
    if acc.type not in ("cuda", "xpu"):
        logger.info("Liger kernels need a CUDA or XPU device (Triton); skipped on %s.", acc.label)
        return False
    if importlib.util.find_spec("liger_kernel") is None:
        raise ModelError("`enable_liger_kernel: true` needs the `liger-kernel` package; install the extra "
                         "`pip install lf-board[liger]` or set it to false.")
    return True


def multiprocessing_start_method() -> str:
    """Start method for worker processes: ``spawn`` on NPU and SUPA (their runtimes do not survive a fork)."""
    if get_accelerator().type in ("npu", "supa"):
        return "spawn"
    return multiprocessing.get_start_method(allow_none=True) or multiprocessing.get_all_start_methods()[0]


def ray_visible_devices_env_vars() -> dict[str, str]:
    """The Ray ``RAY_EXPERIMENTAL_NOSET_*_VISIBLE_DEVICES`` variables set in this environment.

    Ray normally rewrites each worker's ``CUDA_VISIBLE_DEVICES`` / ``ASCEND_RT_VISIBLE_DEVICES`` /
    ``SUPA_VISIBLE_DEVICES``; when the user set one of these variables, the launcher passes it on to every
    Ray worker's ``runtime_env`` so the choice is honoured there too.
    """
    return {name: os.environ[name] for name in RAY_NOSET_VISIBLE_DEVICES_VARS if name in os.environ}


# ---------------------------------------------------------------------------------------------------------
# Environment report (`lf-engine env`)


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def environment_report() -> dict[str, Any]:
    """Versions and devices, for bug reports and ``lf-engine env`` (never imports gradio)."""
    acc = get_accelerator()
    report: dict[str, Any] = {
        "lf_board": _version("lf-board"),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "torch": f"{torch.__version__} ({acc.label})",
        "accelerator": acc.type,
        "accelerator_label": acc.label,
        "packages": {name: v for name in REPORTED_PACKAGES if (v := _version(name))},
    }
    devices = []
    for index in range(acc.count):
        entry: dict[str, Any] = {"index": index, "type": acc.type, "name": device_name(index)}
        try:
            free, total = memory_info(index)
            entry["memory_total_gib"] = round(total / 2**30, 2)
            entry["memory_free_gib"] = round(free / 2**30, 2)
        except Exception as err:
            logger.debug("Memory of %s:%d unknown: %s", acc.type, index, err)
        devices.append(entry)
    report["devices"] = devices
    free, total = (0, 0)
    try:
        import psutil

        vm = psutil.virtual_memory()
        free, total = vm.available, vm.total
    except ImportError:
        pass
    report["cpu"] = {"cores": os.cpu_count(), "memory_total_gib": round(total / 2**30, 2),
                     "memory_free_gib": round(free / 2**30, 2)}
    return report


def format_environment_report(report: dict[str, Any]) -> str:
    """The report as ``- Key: value`` lines, ready to paste into an issue."""
    lines = [
        f"- LF Board version: {report.get('lf_board') or 'not installed (running from source)'}",
        f"- Platform: {report.get('platform')}",
        f"- Python version: {report.get('python')}",
        f"- PyTorch version: {report.get('torch')}",
    ]
    for name, version in report.get("packages", {}).items():
        lines.append(f"- {name} version: {version}")
    cpu = report.get("cpu", {})
    lines.append(f"- CPU cores: {cpu.get('cores')}, RAM: {cpu.get('memory_total_gib')} GiB "
                 f"({cpu.get('memory_free_gib')} GiB free)")
    devices = report.get("devices", [])
    if not devices:
        lines.append("- Accelerator: none (CPU only)")
    else:
        lines.append(f"- Accelerator: {len(devices)} x {str(report.get('accelerator', '')).upper()}")
    for dev in devices:
        memory = ""
        if "memory_total_gib" in dev:
            memory = f", {dev['memory_total_gib']} GiB ({dev['memory_free_gib']} GiB free)"
        lines.append(f"- {dev['type']}:{dev['index']} {dev['name']}{memory}")
    return "\n".join(lines)
