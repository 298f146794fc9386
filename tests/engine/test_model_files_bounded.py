"""The small JSON and YAML files of model, adapter, checkpoint and run folders that the engine reads itself
(processor configs, all_results.json, config.json for the export's dtype and the bitsandbytes guard, export_info.json,
lf_config.yaml, an rm adapter's files) are read only as regular files of a bounded size: a sparse file of hundreds of
MB (a folder from elsewhere, a damaged disk) was read whole and decoded in the job's process (and, for the export's
and rm's checks, in the board's). Each reader here gives its answer for such a file (an error naming the file and its
size, or what it gives for an unreadable file) without holding it."""

from __future__ import annotations

import tracemalloc

import pytest

from engine.multimodal.errors import MediaError

SIZE = 256 << 20
"""Past every bound these files are read to (a model config's 16 MB, a run's JSON file's 4 MB)."""


def _assemble(folder):
    from engine.multimodal.processor import _assemble

    return _assemble(str(folder), False, None)


def _video_settings(folder):
    from engine.multimodal.video_pil import video_settings

    return video_settings(folder)


def _fonts(folder):
    from engine.multimodal.processor import _named_fonts

    return _named_fonts(folder)


def _fix(folder):
    from engine.multimodal.processor import fix_processor_config

    return fix_processor_config(folder)


def _all_results(folder):
    import json

    from engine.evaluate.predict import save_split_metrics

    save_split_metrics(folder, "predict", {"predict_bleu-4": 1.5})
    return json.loads((folder / "all_results.json").read_text())


def _export_dtype(folder):
    from engine.export import _stored_dtype

    return _stored_dtype(str(folder))


def _previous_export(folder):
    from engine.export_checks import previous_export_files

    return previous_export_files(folder)


def _unquantized(folder):
    from engine.import_guard import _config_is_unquantized

    return _config_is_unquantized(None, str(folder))


def _saved_config(folder):
    from engine.checkpoints import read_saved_config  # what the resume checks read it with

    return read_saved_config(folder)


def _rm_adapter(folder):
    from engine.train.rl_checks import _json_table

    return _json_table(folder / "adapter_config.json")[1]


def _rm_base(folder):
    from engine.train.rl_checks import adapter_base

    return adapter_base(folder, {"base_model_name_or_path": "the-adapters-base"})


TOO_LARGE = f"is {SIZE:,} bytes, more than any model's"


@pytest.mark.parametrize(("name", "reader", "expect"), [
    ("processor_config.json", _assemble, MediaError),
    ("preprocessor_config.json", _assemble, MediaError),
    ("processor_config.json", _video_settings, MediaError),
    ("video_preprocessor_config.json", _video_settings, MediaError),
    ("processor_config.json", _fonts, []),
    ("processor_config.json", _fix, MediaError),
    ("all_results.json", _all_results, {"predict_bleu-4": 1.5}),  # replaced by this run's metrics
    ("config.json", _export_dtype, None),
    ("export_info.json", _previous_export, None),
    ("config.json", _unquantized, False),
    ("lf_config.yaml", _saved_config, {}),
    ("adapter_config.json", _rm_adapter, TOO_LARGE),
    ("lf_config.yaml", _rm_base, "the-adapters-base"),
])
def test_an_outsized_file_is_not_read_whole(tmp_path, name, reader, expect):
    import importlib

    for module in ("transformers", "engine.multimodal.processor", "engine.multimodal.video_pil", "engine.export",
                   "engine.evaluate.predict", "engine.export_checks", "engine.import_guard", "engine.preflight",
                   "engine.train.resume_fit", "engine.train.rl_checks", "engine.models.registry",
                   "engine.templates.token_check", "engine.models.loader"):
        importlib.import_module(module)  # imported before memory is counted
    from transformers import AutoFeatureExtractor, AutoImageProcessor  # noqa: F401 - (the same)

    folder = tmp_path / "model"
    folder.mkdir()
    with open(folder / name, "wb") as fh:
        fh.truncate(SIZE)  # sparse: no disk taken
    tracemalloc.start()
    try:
        if expect is MediaError:
            with pytest.raises(MediaError, match=TOO_LARGE):
                reader(folder)
        else:
            got = reader(folder)
            assert got == expect or (isinstance(expect, str) and expect in got)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 40 << 20, f"{peak:,} bytes held to read {name}"
