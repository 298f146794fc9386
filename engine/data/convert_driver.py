"""Convert a dataset's rows one at a time: each row through its formatting's converter (:mod:`engine.data.converters`)
and :func:`~engine.data.converters.finalize` for the stage; rows that cannot be used are counted and reported in one
warning, and a dataset with none left is refused.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from typing import Any

from engine.data import kl_stand_ins
from engine.data.converters import CONVERTERS, MEDIA, finalize
from engine.data.detect import detect_format
from engine.data.errors import DatasetError, RowError
from engine.data.null_turns import RefusedRow
from engine.data.registry import DatasetSpec
from engine.wording import counted

logger = logging.getLogger(__name__)

OPTIONAL_COLUMNS = {"query", "history", "system", "tools"}  # a row without them is whole (their absence is no cause)


def _absent_columns(row: Any, spec: DatasetSpec) -> str:
    """For a rejected row: the columns dataset_info.json names for it that the row does not have (the likely cause
    of "no assistant reply" and the like when the mapping names the wrong columns)."""
    if not isinstance(row, dict) or not spec.columns:
        return ""
    absent = [f"{key}: {name!r}" for key, name in spec.columns.items()
              if isinstance(name, str) and key not in MEDIA and key not in OPTIONAL_COLUMNS and name not in row]
    if not absent:
        return ""
    return (f" (dataset_info.json maps {', '.join(absent)}, which the row does not have; its columns: "
            f"{', '.join(sorted(map(str, row))) or 'none'})")


def _check_unicode(value: Any, where: str = "") -> None:
    """Raise RowError for text holding a lone UTF-16 surrogate (a JSON escape such as ``\\ud800`` with no partner):
    it is not Unicode text, and tokenizers stop on it with a TypeError."""
    if isinstance(value, str):
        if not value.isascii():
            try:
                value.encode("utf-8")
            except UnicodeEncodeError as err:
                raise RowError(f"{where or 'a text'} holds a lone surrogate ({value[err.start]!r} at character "
                               f"{err.start}), which is not valid text; fix the escape in the file") from None
    elif isinstance(value, dict):
        for key, item in value.items():
            _check_unicode(item, f"{where}.{key}" if where else str(key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _check_unicode(item, f"{where}[{index}]")


def new_tally() -> dict[str, Any]:
    """Counts kept by :func:`iter_converted`: rows read, examples kept, rows skipped (the first few with reasons)."""
    return {"rows": 0, "kept": 0, "skipped": 0, "shown": []}


def iter_converted(rows: Iterable[dict[str, Any]], spec: DatasetSpec, stage: str, tally: dict[str, Any],
                   stand_ins: bool = False) -> Iterator[dict[str, Any]]:
    """Canonical examples of ``rows`` (``spec`` already detected), one at a time; unusable rows are counted in
    ``tally`` (see :func:`report_conversion`), and with ``stand_ins`` (KTO training data) replaced by
    :mod:`engine.data.kl_stand_ins`' stand-ins."""
    converter = CONVERTERS[spec.formatting]
    for row in rows:
        index = tally["rows"]
        tally["rows"] = index + 1
        converted = None
        try:
            example = finalize(converted := converter(row, spec), stage)
            _check_unicode(example)
        except RefusedRow as err:
            raise DatasetError(f"Dataset {spec.name!r}, row {index}: {err}") from None
        except RowError as err:
            tally["skipped"] += 1
            if len(tally["shown"]) < 5:
                tally["shown"].append((index, str(err) + _absent_columns(row, spec)))
            if stand_ins:  # a row whose media are missing still lends its reply
                yield kl_stand_ins.stand_in(converted or kl_stand_ins.without_media(converter, row, spec), index)
            continue
        tally["kept"] += 1
        yield example


def report_conversion(spec: DatasetSpec, stage: str, tally: dict[str, Any]) -> None:
    """Warn once about skipped rows; raise DatasetError when no row was usable."""
    skipped = tally["skipped"]
    if skipped:
        shown = ", ".join(f"{index} ({reason})" for index, reason in tally["shown"])
        more = f" and {skipped - 5} more" if skipped > 5 else ""
        logger.warning("Dataset %s: skipped %d of %s that cannot be used for stage %s: %s %s%s.", spec.name, skipped,
                       counted(tally["rows"], "row"), stage, "row" if skipped == 1 else "rows", shown, more)
    if not tally["kept"]:
        reason = tally["shown"][0][1] if skipped else "the file has no rows"
        raise DatasetError(
            f"Dataset {spec.name!r} has no usable rows for stage {stage} ({counted(tally['rows'], 'row')} read; first problem: "
            f"{reason}). Check its `formatting`, `columns` and `tags` in dataset_info.json."
        )


def convert_rows(rows: list[dict[str, Any]], spec: DatasetSpec, stage: str) -> list[dict[str, Any]]:
    """Canonical examples for ``stage``; unusable rows are skipped with one warning that counts them.

    Raises:
        DatasetError: when no row is usable.
    """
    spec = detect_format(spec, rows)
    tally = new_tally()
    examples = list(iter_converted(rows, spec, stage, tally))
    report_conversion(spec, stage, tally)
    return examples
