"""Loading a model's multimodal processor, with or without torchvision.

transformers 5 gives most families a PIL image processor (``*ImageProcessorPil``) that needs no torchvision, but
its video processors do. ``AutoProcessor`` therefore fails for a vision-language folder on a torch build without
torchvision. :func:`load_media_processor` then assembles the same processor class from its parts: the PIL image
processor, the tokenizer, the audio feature extractor, and in place of the video processor a stand-in that
refuses video with a message naming the install. Images and audio work either way. A few processor modules
import a helper from their family's torchvision image processor (Pixtral's); :func:`processor_class` loads them
with the same helper from the Pillow image processor's module (:data:`TORCHVISION_HELPERS`).

The data options (``image_max_pixels`` ...) ride on the processor as attributes (``lf_media``) so that readers
and plugins take them from one place.
"""

from __future__ import annotations

import importlib.util
import inspect
import logging
import os
from dataclasses import dataclass
from typing import Any

from engine.multimodal.errors import MediaError

logger = logging.getLogger(__name__)

VIDEO_KEYS = ("size", "patch_size", "temporal_patch_size", "merge_size", "pooling_kernel_size", "max_soft_tokens",
              "image_mean", "image_std", "rescale_factor")
"""Video processor settings carried over when a stand-in's saved config is rewritten for the real class."""

STAND_INS = ("NoVideoProcessor", "PilQwenVideoProcessor", "PilGemma4VideoProcessor")
"""Our video processors that stand in for transformers' torchvision-based ones."""

TORCHVISION_FIX = ("video needs torchvision, which the CPU torch 2.13 build cannot import; install the pair "
                   "`pip install torch==2.14.1 torchvision==0.29.1` (or the torchvision matching your torch), or "
                   "drop the rows with video")


def has_torchvision() -> bool:
    """Whether torchvision is installed (transformers' video processors need it)."""
    return importlib.util.find_spec("torchvision") is not None


@dataclass
class MediaOptions:
    """The data keys that shape media, as LLaMA-Factory names them."""

    image_max_pixels: int = 768 * 768
    image_min_pixels: int = 32 * 32
    video_max_pixels: int = 256 * 256
    video_min_pixels: int = 16 * 16
    video_fps: float = 2.0
    video_maxlen: int = 128
    audio_sampling_rate: int = 16000
    use_audio_in_video: bool = False

    @classmethod
    def from_data_args(cls, data: Any) -> MediaOptions:
        """Options from a :class:`engine.config.DataArgs` (missing keys keep their defaults)."""
        defaults = cls()
        return cls(**{name: getattr(data, name, getattr(defaults, name)) for name in defaults.__dict__})


FRAME_KEYS = ("slice_mode", "downsample_mode", "use_image_id")
"""Image-processor settings a stand-in video processor carries, for processors that read their video processor's
at init (MiniCPM-V 4.6's slice mode and token divisor)."""


def no_video_processor(image_processor: Any = None) -> Any:
    """The stand-in that refuses video (with the install to make), carrying ``image_processor``'s
    :data:`FRAME_KEYS`."""
    stand_in = _no_video_class()()
    for key in FRAME_KEYS:
        if hasattr(image_processor, key):
            setattr(stand_in, key, getattr(image_processor, key))
    return stand_in


def _no_video_class():
    from transformers.video_processing_utils import BaseVideoProcessor

    class NoVideoProcessor(BaseVideoProcessor):
        """Stands in for a video processor that needs torchvision; any video is refused with the fix."""

        font = ""  # ERNIE-4.5-VL's processor copies its video processor's timestamp font when saved: none here

        def __call__(self, *args: Any, **kwargs: Any) -> Any:
            raise MediaError(f"This model's {TORCHVISION_FIX}.")

        preprocess = __call__

    return NoVideoProcessor


TORCHVISION_HELPERS = {"PixtralProcessor": ("pixtral", ("get_resize_output_image_size",))}
"""Processor class -> (its model folder in transformers, the names its module imports from the torchvision image
processor module; the Pillow one, ``image_processing_pil_<folder>``, defines the same functions)."""


def processor_class(name: str) -> type | None:
    """transformers' processor class of that name, the real one also where its module needs torchvision only for
    a helper (:data:`TORCHVISION_HELPERS`); None when transformers has no such class."""
    import importlib
    import sys
    import types

    import transformers

    if name not in TORCHVISION_HELPERS or has_torchvision():
        from transformers.processing_utils import ProcessorMixin

        found = getattr(transformers, name, None) if name.isidentifier() else None
        return found if isinstance(found, type) and issubclass(found, ProcessorMixin) else None
    folder, helpers = TORCHVISION_HELPERS[name]
    package = f"transformers.models.{folder}"
    pil = importlib.import_module(f"{package}.image_processing_pil_{folder}")
    torchvision_module = f"{package}.image_processing_{folder}"
    stand_in = types.ModuleType(torchvision_module)
    for helper in helpers:
        setattr(stand_in, helper, getattr(pil, helper))
    previous = sys.modules.get(torchvision_module)
    sys.modules[torchvision_module] = stand_in
    try:
        module = importlib.import_module(f"{package}.processing_{folder}")
    finally:
        if previous is None:
            sys.modules.pop(torchvision_module, None)
        else:
            sys.modules[torchvision_module] = previous
    return getattr(module, name)


def build_processor(processor_cls: type, parts: dict[str, Any]) -> Any:
    """``processor_cls(**parts)``, with a stand-in video processor where the class wants one and none is given: the
    Pillow one of :mod:`engine.multimodal.video_pil` for the Qwen VL families, else one that refuses video."""
    params = inspect.signature(processor_cls.__init__).parameters
    parts = dict(parts)
    if "video_processor" in params and parts.get("video_processor") is None:
        from engine.multimodal.video_pil import pil_video_processor

        parts["video_processor"] = (pil_video_processor(processor_cls.__name__, parts.get("image_processor"), {})
                                    or no_video_processor(parts.get("image_processor")))
    if "feature_extractor" in params and parts.get("feature_extractor") is None:
        raise MediaError(f"{processor_cls.__name__} needs an audio feature extractor, and none was found.")
    from transformers.processing_utils import ProcessorMixin

    original = ProcessorMixin.check_argument_for_proper_class

    def check(self: Any, name: str, argument: Any) -> Any:
        if name == "video_processor" and type(argument).__name__ in STAND_INS:
            return type(argument)  # transformers cannot look up video classes without torchvision
        return original(self, name, argument)

    ProcessorMixin.check_argument_for_proper_class = check
    try:
        return processor_cls(**parts)
    finally:
        ProcessorMixin.check_argument_for_proper_class = original


def read_folder_json(file: Any) -> dict[str, Any]:
    """A model folder's processor or tokenizer JSON file as a dict ({} for JSON that is no object), read only as a
    regular file of a bounded size (a processor config's 16 MB, a tokenizer config's as the template-token check
    reads it): an outsized one, sparse or not, was read whole in the job's process, and a named pipe held it.

    Raises:
        MediaError: unreadable, not a regular file, outsized, not UTF-8 or not JSON (naming the file and the fix).
    """
    import json
    from pathlib import Path

    from engine.models.registry import ConfigTooLarge, read_config_text
    from engine.templates.token_check import MAX_TOKENIZER_BYTES

    file = Path(file)
    try:
        data = json.loads(read_config_text(file, MAX_TOKENIZER_BYTES if file.name.startswith("tokenizer") else None))
    except ConfigTooLarge as err:
        raise MediaError(str(err)) from None
    except (OSError, ValueError, RecursionError) as err:
        reason = "nested too deeply" if isinstance(err, RecursionError) else err
        raise MediaError(f"{file} cannot be read ({reason}); copy it again from the original model.") from None
    return data if isinstance(data, dict) else {}


def _assemble(path: str, trust_remote_code: bool, tokenizer: Any) -> Any:
    """The processor of ``path`` built part by part (for when AutoProcessor needs torchvision)."""
    from pathlib import Path

    from transformers import AutoFeatureExtractor, AutoImageProcessor

    read = read_folder_json
    config_file = Path(path) / "processor_config.json"
    name = None
    extra: dict[str, Any] = {}
    if config_file.is_file():
        extra = read(config_file)
        name = extra.pop("processor_class", None)
    if name is None:
        for candidate in ("preprocessor_config.json", "tokenizer_config.json"):
            file = Path(path) / candidate
            if file.is_file():
                name = read(file).get("processor_class")
                if name:
                    break
    processor_cls = processor_class(str(name)) if name else None
    if processor_cls is None:
        if name:
            raise MediaError(f"The model folder {path} names `processor_class: {name}`, which is not a transformers "
                             "processor; copy the processor files (processor_config.json, preprocessor_config.json) "
                             "from the original model.")
        return None
    parts: dict[str, Any] = {"tokenizer": tokenizer}
    params = inspect.signature(processor_cls.__init__).parameters
    if "image_processor" in params:
        parts["image_processor"] = AutoImageProcessor.from_pretrained(path, trust_remote_code=trust_remote_code)
    if "feature_extractor" in params:
        parts["feature_extractor"] = AutoFeatureExtractor.from_pretrained(path, trust_remote_code=trust_remote_code)
    parts.update({k: v for k, v in extra.items() if k in params and not isinstance(v, dict)})
    if "video_processor" in params:
        from engine.multimodal.video_pil import pil_video_processor, video_settings

        parts["video_processor"] = pil_video_processor(processor_cls.__name__, parts.get("image_processor"),
                                                       video_settings(path))
    processor = build_processor(processor_cls, parts)
    video = "video through Pillow" if parts.get("video_processor") is not None else "video is refused"
    logger.info("Built %s without torchvision: images%s work, %s.", processor_cls.__name__,
                " and audio" if "feature_extractor" in parts else "", video)
    return processor


def media_config(config: dict[str, Any]) -> dict[str, Any]:
    """The part of a ``config.json`` that names the media towers: the thinker's for a whole Qwen-Omni checkpoint
    (whose ``vision_config`` / ``audio_config`` sit under ``thinker_config``), with the checkpoint's model type; the
    config itself otherwise."""
    thinker = config.get("thinker_config")
    if isinstance(thinker, dict) and not any(config.get(key) for key in ("vision_config", "audio_config")):
        return {**thinker, "model_type": config.get("model_type")}
    return config


def load_media_processor(model_args: Any, tokenizer: Any = None) -> Any:
    """The multimodal processor of the model in ``model_args``, or None for a text-only model.

    The tokenizer given (with the template's fixes) replaces the processor's own, so both agree on token ids.
    """
    from transformers import AutoProcessor

    from engine.models.loader import load_tokenizer, resolve_model_path

    path = resolve_model_path(model_args.model_name_or_path, model_args.cache_dir, model_args.model_revision)
    from engine.models.registry import read_local_config

    config = media_config(read_local_config(path) or {})
    if not any(key in config for key in ("vision_config", "audio_config")):
        return None
    tokenizer = tokenizer if tokenizer is not None else load_tokenizer(model_args)
    try:
        processor = AutoProcessor.from_pretrained(path, trust_remote_code=model_args.trust_remote_code)
    except ImportError as err:
        if "torchvision" not in str(err).lower():
            raise MediaError(f"The processor of `{model_args.model_name_or_path}` cannot be loaded: {err}") from None
        processor = _assemble(path, model_args.trust_remote_code, tokenizer)
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as err:
        logger.debug("AutoProcessor failed for %s (%s); assembling it.", path, err)
        processor = _assemble(path, model_args.trust_remote_code, tokenizer)
    if processor is None or not hasattr(processor, "tokenizer"):
        return None
    processor.tokenizer = tokenizer
    return processor


def video_ready(processor: Any) -> bool:
    """Whether the processor can take video (a real video processor or the Pillow one, not the refusing stand-in)."""
    video = getattr(processor, "video_processor", None)
    return video is not None and type(video).__name__ != "NoVideoProcessor"


SHARED_VIDEO_PROCESSORS = {"Qwen2_5_VLProcessor": "Qwen2VLVideoProcessor", "Qwen2_5OmniProcessor": "Qwen2VLVideoProcessor",
                           "Qwen3OmniMoeProcessor": "Qwen2VLVideoProcessor", "Qwen3_5Processor": "Qwen3VLVideoProcessor"}
"""Processors whose family takes another family's video processor (transformers' video processor mapping)."""


def real_video_processor(processor_class: str) -> str | None:
    """The name of the transformers video processor class of a processor class, or None when transformers has none
    by that name (Qwen2.5-VL's is Qwen2-VL's: a ``Qwen2_5_VLVideoProcessor`` does not exist)."""
    import transformers

    name = SHARED_VIDEO_PROCESSORS.get(processor_class) or processor_class.replace("Processor", "VideoProcessor")
    return name if hasattr(transformers, name) else None


VIDEO_CONFIG_FIXES = {"Ernie4_5_VLMoeProcessor": {"temporal_patch_size": 2, "draw_on_frames": False}}
"""Settings the real video processor of a processor class needs in place of the stand-in's: ERNIE-4.5-VL's takes a
temporal patch of 2 (its image processor's is 1), and draws timestamps only with the font file a stand-in never
had."""


def fix_processor_config(folder: Any) -> None:
    """Make a saved processor_config.json name the family's real video processor instead of the stand-in, so
    transformers with torchvision loads the folder as it loads the original model."""
    import json
    from pathlib import Path

    path = Path(folder) / "processor_config.json"
    if not path.is_file():
        return
    config = read_folder_json(path)
    video = config.get("video_processor")
    if not isinstance(video, dict) or video.get("video_processor_type") not in STAND_INS:
        return
    real_name = real_video_processor(str(config.get("processor_class", "")))
    if real_name is None:
        return
    image = config.get("image_processor") or {}
    real = {"video_processor_type": real_name}
    real.update({k: image[k] for k in ("patch_size", "temporal_patch_size", "merge_size", "pooling_kernel_size")
                 if k in image})
    # the settings our Pillow video processor used, so transformers' own one processes video the same way
    real.update({k: video[k] for k in (*VIDEO_KEYS, *FRAME_KEYS) if video.get(k) is not None})
    real.update(VIDEO_CONFIG_FIXES.get(str(config.get("processor_class", "")), {}))
    config["video_processor"] = real
    from engine.runs import write_text_atomic

    write_text_atomic(path, json.dumps(config, indent=2, sort_keys=True) + "\n")  # whole or as it was


def save_processor(processor: Any, folder: Any) -> None:
    """``processor.save_pretrained(folder)`` (tokenizer and chat template included), loadable by transformers."""
    processor.save_pretrained(folder)
    fix_processor_config(folder)


PROCESSOR_FILES = ("processor_config.json", "preprocessor_config.json", "video_preprocessor_config.json")


MAX_PROCESSOR_FILE_BYTES = 512 << 20
"""The largest processor file copied (bytes). Real ones are a few KB (configs) to a few MB (a font); a tokenizer.json
of a large vocabulary, the biggest file a processor's folder holds, is about 30 MB."""


def copy_processor_files(source: Any, target: Any) -> list[str]:
    """Copy a model folder's processor files (not the tokenizer's) into ``target``; returns the names copied.

    Each is copied only when it is a regular file of at most :data:`MAX_PROCESSOR_FILE_BYTES` inside the model
    folder (:func:`_copy_from_model`).

    Raises:
        MediaError: a processor file that is no regular file, outsized, or a link out of the model folder.
    """
    from pathlib import Path

    copied = []
    for name in PROCESSOR_FILES:
        if os.path.lexists(Path(source) / name):
            _copy_from_model(Path(source), name, Path(target))
            copied.append(name)
    for name in _named_fonts(Path(source)):  # ERNIE-4.5-VL's video timestamp font, which its processor loads
        _copy_from_model(Path(source), name, Path(target))
        copied.append(name)
    fix_processor_config(target)
    return copied


def _copy_from_model(folder: Any, name: str, target: Any) -> None:
    """``folder/name`` copied to ``target/name`` (replacing what was there, a link included, never writing
    through it), only when it is a regular file of at most :data:`MAX_PROCESSOR_FILE_BYTES` that lies in the model
    folder (for a hub cache snapshot, its repository's ``blobs`` too, where its links lead).

    A model folder from elsewhere can hold a sparse file of gigabytes (copied at full size, filling the disk), a
    named pipe (waited on), or a link to any file of the user's (copied into an export that may be uploaded).

    Raises:
        MediaError: naming the file, what is wrong and the fix.
    """
    import tempfile
    from pathlib import Path

    from engine.atomic_write import sync_file, sync_folder
    from engine.fileperms import default_file_mode
    from engine.runs import open_regular

    source = Path(folder) / name
    real = Path(os.path.realpath(source))
    roots = [Path(os.path.realpath(folder))]
    if Path(folder).parent.name == "snapshots":  # huggingface_hub's cache: snapshots/<rev>/<file> -> ../../blobs/
        roots.append(Path(os.path.realpath(Path(folder).parent.parent / "blobs")))
    if not any(real.is_relative_to(root) for root in roots):
        raise MediaError(f"{source} is a link to {real}, outside the model folder {folder}; a processor file is "
                         "copied into the trained model's or export's folder, so put the file itself in the model "
                         "folder (copy it again from the original model).")
    try:
        fh = open_regular(source)
    except OSError as err:
        raise MediaError(f"{source} cannot be copied ({err.strerror or err}); copy it again from the original "
                         "model.") from None
    with fh:
        size = os.fstat(fh.fileno()).st_size
        if size > MAX_PROCESSOR_FILE_BYTES:
            raise MediaError(f"{source} is {size:,} bytes, more than any model's processor file (at most "
                             f"{MAX_PROCESSOR_FILE_BYTES:,} are copied); copy it again from the original model.")
        out = tempfile.NamedTemporaryFile(dir=target, prefix=f".{name}.", delete=False)
        try:
            with out:
                copied = 0
                while copied <= size and (chunk := fh.read(min(1 << 20, size + 1 - copied))):
                    out.write(chunk)
                    copied += len(chunk)
                out.flush()
                sync_file(out.fileno())  # on the disk before the rename gives it its name (engine.atomic_write)
            if copied > size:  # grew while copied
                raise MediaError(f"{source} grew while it was copied; copy it again from the original model.")
            os.chmod(out.name, default_file_mode())  # as a file written with open() (a temporary one is 0600)
            os.replace(out.name, Path(target) / name)
        except BaseException:
            Path(out.name).unlink(missing_ok=True)
            raise
    sync_folder(Path(target))


def _named_fonts(folder: Any) -> list[str]:
    """Font files of ``folder`` its video processor config names (``font``: ERNIE-4.5-VL draws timestamps with it)."""
    from pathlib import Path

    names = []
    for file, key in (("processor_config.json", "video_processor"), ("video_preprocessor_config.json", None)):
        try:
            data: Any = read_folder_json(Path(folder) / file)
        except MediaError:
            continue
        data = data.get(key) if key and isinstance(data, dict) else data
        font = data.get("font") if isinstance(data, dict) else None
        if isinstance(font, str) and font and Path(font).name == font and (Path(folder) / font).is_file():
            names.append(font)
    return list(dict.fromkeys(names))
